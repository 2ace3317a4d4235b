// ModelCatalog with fake workers (gMock stubs whose DescribeModel streams a
// real tiny model's card): each model is learnt from its first worker and
// reused, one id names one set of weights at a time, names resolve to the
// right model, and a router given --model admits its own model only.
#include "services/router/server/model_catalog.h"

#include <gmock/gmock.h>
#include <grpcpp/test/mock_stream.h>
#include <gtest/gtest.h>

#include "kvfleet/v1/worker_mock.grpc.pb.h"
#include "model/model.h"
#include "services/transport/wire/model_card_convert.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::router {
namespace {

using ::testing::_;
using ::testing::NiceMock;

// A worker that describes `card` (in small chunks) and counts how often it was asked.
struct FakeWorker {
  model::ModelCard card;
  grpc::Status finish = grpc::Status::OK;
  int described = 0;
  std::shared_ptr<NiceMock<v1::MockWorkerStub>> stub = std::make_shared<NiceMock<v1::MockWorkerStub>>();

  explicit FakeWorker(model::ModelCard c) : card(std::move(c)) {
    ON_CALL(*stub, DescribeModelRaw(_, _)).WillByDefault([this](auto*, const auto&) {
      ++described;
      auto chunks = std::make_shared<std::vector<v1::ModelDescriptionChunk>>(transport::ChunkModelCard(card, 256));
      auto reader = new NiceMock<grpc::testing::MockClientReader<v1::ModelDescriptionChunk>>();
      auto next = std::make_shared<size_t>(0);
      ON_CALL(*reader, Read(_)).WillByDefault([chunks, next](v1::ModelDescriptionChunk* out) {
        if (*next == chunks->size()) return false;
        *out = (*chunks)[(*next)++];
        return true;
      });
      ON_CALL(*reader, Finish()).WillByDefault([this] { return finish; });
      return reader;
    });
  }

  v1::WorkerInfo Info() const {
    v1::WorkerInfo info;
    info.set_model_id(card.id);
    info.set_model_fingerprint(card.fingerprint);
    info.set_model_card_digest(transport::ChunkModelCard(card).front().card_digest());
    info.set_block_size(16);
    return info;
  }
};

class ModelCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Path("m.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 3, .context_length = 96}, path_).ok());
    absl::StatusOr<std::unique_ptr<model::Model>> m = model::Model::Load(path_, {.weights = false});
    ASSERT_TRUE(m.ok()) << m.status();
    base_ = model::CardOf(**m, "tiny", std::string(64, 'a'));
  }

  model::ModelCard Card(const std::string& id, char weights, const std::string& served = "") const {
    model::ModelCard c = base_;
    c.id = id;
    c.fingerprint = std::string(64, weights);
    c.served_name = served;
    return c;
  }

  static absl::Status Admit(ModelCatalog& catalog, const std::string& worker_id, FakeWorker& w) {
    return catalog.Admit(worker_id, w.Info(), *w.stub);
  }

  testing::TempDir dir_;
  std::string path_;
  model::ModelCard base_;
};

TEST_F(ModelCatalogTest, AModelIsLearntFromItsFirstWorkerAndReused) {
  ModelCatalog catalog({});
  EXPECT_EQ(catalog.Resolve("tiny").status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(catalog.Resolve("").status().message().find("serves no model now"), absl::string_view::npos);
  FakeWorker w1(Card("tiny", 'a', "tiny-chat")), w2(Card("tiny", 'a', "tiny-chat"));
  ASSERT_TRUE(Admit(catalog, "w1", w1).ok()) << Admit(catalog, "w1", w1);
  ASSERT_TRUE(Admit(catalog, "w2", w2).ok());
  EXPECT_EQ(w1.described + w2.described, 1) << "one fetch per model and weights";

  for (const char* name : {"tiny", "tiny-chat", ""}) {
    absl::StatusOr<ServedModel> m = catalog.Resolve(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ(m->model->id(), "tiny");
    EXPECT_EQ(m->model->served_name(), "tiny-chat");
    EXPECT_EQ(m->fingerprint, std::string(64, 'a'));
    EXPECT_EQ(m->model->context_length(), 96);
  }
  // Its workers leave and come back: known all along, never fetched again.
  catalog.Release("w1");
  catalog.Release("w2");
  EXPECT_TRUE(catalog.Resolve("tiny").ok()) << "known with no worker: the pool says UNAVAILABLE, not NOT_FOUND";
  ASSERT_TRUE(Admit(catalog, "w1", w1).ok());
  EXPECT_EQ(w1.described + w2.described, 1);
}

TEST_F(ModelCatalogTest, OneIdNamesOneSetOfWeightsUntilItsWorkersLeave) {
  ModelCatalog catalog({});
  FakeWorker old1(Card("tiny", 'a')), old2(Card("tiny", 'a')), fresh(Card("tiny", 'b'));
  ASSERT_TRUE(Admit(catalog, "old-1", old1).ok());
  ASSERT_TRUE(Admit(catalog, "old-2", old2).ok());
  const absl::Status refused = Admit(catalog, "new-1", fresh);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("worker new-1 serves model tiny with weights bbbbbbbbbbbb"), absl::string_view::npos)
      << refused;
  EXPECT_NE(refused.message().find("worker old-1 serves it with weights aaaaaaaaaaaa"), absl::string_view::npos)
      << refused;
  EXPECT_NE(refused.message().find("--model-id"), absl::string_view::npos);
  EXPECT_EQ(catalog.Resolve("tiny")->fingerprint, std::string(64, 'a'));

  catalog.Release("old-1");
  EXPECT_FALSE(Admit(catalog, "new-1", fresh).ok()) << "old-2 still holds the old weights";
  catalog.Release("old-2");
  ASSERT_TRUE(Admit(catalog, "new-1", fresh).ok());
  EXPECT_EQ(catalog.Resolve("tiny")->fingerprint, std::string(64, 'b')) << "hashes now chain from the new weights";
  EXPECT_EQ(fresh.described, 1) << "the refused worker's card was kept, not fetched at every probe";
  EXPECT_FALSE(Admit(catalog, "old-1", old1).ok()) << "and now the old weights are the ones refused";
}

TEST_F(ModelCatalogTest, ANewChatTemplateReachesTheRouterOnceTheOldWorkersLeave) {
  ModelCatalog catalog({});
  model::ModelCard with_new_template = Card("tiny", 'a');
  with_new_template.vocabulary.chat_template = "{{ messages[0].content }}!";
  FakeWorker old(Card("tiny", 'a')), fresh(with_new_template);
  ASSERT_TRUE(Admit(catalog, "old", old).ok());
  const absl::Status refused = Admit(catalog, "fresh", fresh);
  EXPECT_NE(refused.message().find("worker fresh describes model tiny otherwise than worker old"),
            absl::string_view::npos)
      << refused;
  catalog.Release("old");
  ASSERT_TRUE(Admit(catalog, "fresh", fresh).ok());
  EXPECT_EQ(fresh.described, 1) << "its own card, fetched once (kept while refused)";
  EXPECT_NE(catalog.Resolve("tiny")->model, nullptr);
  EXPECT_FALSE(Admit(catalog, "old", old).ok()) << "now the old card is the one refused";
}

TEST_F(ModelCatalogTest, SeveralModelsResolveByTheirNamesAndAnEmptyNameIsRefused) {
  ModelCatalog catalog({});
  FakeWorker chat(Card("chat", 'a')), coder(Card("coder", 'c', "coder-1"));
  ASSERT_TRUE(Admit(catalog, "w1", chat).ok());
  ASSERT_TRUE(Admit(catalog, "w2", coder).ok());
  EXPECT_EQ(catalog.Resolve("chat")->model->id(), "chat");
  EXPECT_EQ(catalog.Resolve("coder-1")->model->id(), "coder");
  EXPECT_EQ(catalog.Resolve("coder")->fingerprint, std::string(64, 'c'));
  const absl::Status empty = catalog.Resolve("").status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.message().find("name one of chat, coder-1"), absl::string_view::npos) << empty;
  const absl::Status unknown = catalog.Resolve("llama-70b").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("'llama-70b' is not served here; this router serves chat, coder-1"),
            absl::string_view::npos)
      << unknown;
  ASSERT_EQ(catalog.Models().size(), 2u);
  EXPECT_EQ(catalog.Models()[0].model->id(), "chat");

  FakeWorker clash(Card("other", 'd', "chat"));
  const absl::Status s = Admit(catalog, "w3", clash);
  EXPECT_NE(s.message().find("a name model chat already answers to"), absl::string_view::npos) << s;
}

TEST_F(ModelCatalogTest, AModelWhoseWorkersAllLeftGivesUpItsNameButStillResolves) {
  ModelCatalog catalog({});
  FakeWorker old(Card("chat-v1", 'a', "chat")), kept(Card("coder", 'c'));
  ASSERT_TRUE(Admit(catalog, "w1", old).ok());
  ASSERT_TRUE(Admit(catalog, "w2", kept).ok());
  catalog.Release("w1");
  // Still known (UNAVAILABLE from the pool, not NOT_FOUND), but no longer one of "the" models.
  EXPECT_EQ(catalog.Resolve("chat-v1")->model->id(), "chat-v1");
  EXPECT_EQ(catalog.Resolve("")->model->id(), "coder") << "the one model with workers";
  // A redeployment under a new id takes the name over at once.
  FakeWorker fresh(Card("chat-v2", 'b', "chat"));
  ASSERT_TRUE(Admit(catalog, "w3", fresh).ok()) << Admit(catalog, "w3", fresh);
  EXPECT_EQ(catalog.Resolve("chat")->model->id(), "chat-v2");
}

TEST_F(ModelCatalogTest, AWorkerThatCannotDescribeItsModelIsRefusedSayingWhy) {
  ModelCatalog catalog({});
  FakeWorker broken(Card("tiny", 'a'));
  broken.finish = grpc::Status(grpc::StatusCode::UNAVAILABLE, "loading");
  absl::Status s = Admit(catalog, "w1", broken);
  EXPECT_NE(s.message().find("model tiny of worker w1: DescribeModel failed: loading"), absl::string_view::npos) << s;

  FakeWorker liar(Card("tiny", 'a'));
  v1::WorkerInfo info = liar.Info();
  info.set_model_id("other");
  s = catalog.Admit("w2", info, *liar.stub);
  EXPECT_NE(s.message().find("but GetInfo said other"), absl::string_view::npos) << s;
  EXPECT_TRUE(catalog.Models().empty());
}

TEST_F(ModelCatalogTest, ARouterGivenAModelAdmitsItsWorkersOnlyAndTakesTheirFingerprint) {
  absl::StatusOr<std::unique_ptr<RouterModel>> file = RouterModel::Load(path_, {.model_id = "tiny"});
  ASSERT_TRUE(file.ok()) << file.status();
  std::shared_ptr<const RouterModel> fixed = *std::move(file);
  ModelCatalog catalog({.fixed = fixed});
  ASSERT_TRUE(catalog.Resolve("").ok()) << "known before any worker";
  EXPECT_EQ(catalog.Resolve("tiny")->fingerprint, "");

  FakeWorker mine(Card("tiny", 'a')), other(Card("coder", 'c'));
  ASSERT_TRUE(Admit(catalog, "w1", mine).ok());
  EXPECT_EQ(mine.described, 0) << "the file is the card";
  EXPECT_EQ(catalog.Resolve("tiny")->model, fixed);
  EXPECT_EQ(catalog.Resolve("tiny")->fingerprint, std::string(64, 'a'));
  const absl::Status s = Admit(catalog, "w2", other);
  EXPECT_NE(s.message().find("serves model coder, and this router serves only tiny (--model)"), absl::string_view::npos)
      << s;
}

v1::WorkerStats WithAdapters(std::initializer_list<std::pair<const char*, char>> adapters) {
  v1::WorkerStats stats;
  for (const auto& [name, digest] : adapters) {
    v1::LoraAdapterInfo& a = *stats.add_lora_adapters();
    a.set_name(name);
    a.set_digest(std::string(64, digest));
    a.set_rank(8);
  }
  return stats;
}

TEST_F(ModelCatalogTest, AnAdapterNameResolvesToItsBaseUnderItsHoldersWeights) {
  ModelCatalog catalog({});
  FakeWorker w1(Card("tiny", 'a')), w2(Card("tiny", 'a')), w3(Card("tiny", 'a')), other(Card("big", 'b'));
  for (auto [id, w] : {std::pair<const char*, FakeWorker*>{"w1", &w1}, {"w2", &w2}, {"w3", &w3}, {"o", &other}}) {
    ASSERT_TRUE(Admit(catalog, id, *w).ok());
  }
  EXPECT_EQ(catalog.Resolve("sql").status().code(), absl::StatusCode::kNotFound);
  // Two workers hold sql's new weights ('n'), one still the old ('o').
  catalog.Observe("w1", w1.Info(), WithAdapters({{"sql", 'n'}, {"chat", 'c'}}), *w1.stub);
  catalog.Observe("w2", w2.Info(), WithAdapters({{"sql", 'n'}}), *w2.stub);
  catalog.Observe("w3", w3.Info(), WithAdapters({{"sql", 'o'}}), *w3.stub);
  absl::StatusOr<ServedModel> sql = catalog.Resolve("sql");
  ASSERT_TRUE(sql.ok()) << sql.status();
  EXPECT_EQ(sql->model->id(), "tiny");
  EXPECT_EQ(sql->lora, "sql");
  EXPECT_EQ(sql->lora_digest, std::string(64, 'n')) << "the digest most holders report";
  EXPECT_EQ(sql->LoraIdentity(), "sql@" + std::string(64, 'n'));
  EXPECT_TRUE(catalog.Resolve("tiny")->lora.empty());
  const std::vector<ModelCatalog::ServedAdapter> adapters = catalog.Adapters("tiny");
  ASSERT_EQ(adapters.size(), 2u);
  EXPECT_EQ(adapters[1].name, "sql");
  EXPECT_EQ(adapters[1].holders, (std::vector<std::string>{"w1", "w2", "w3"}));

  // Named apart: the base by name, the adapter by field.
  ASSERT_TRUE(catalog.ResolveAdapter(*catalog.Resolve("tiny"), "chat").ok());
  const absl::Status missing = catalog.ResolveAdapter(*catalog.Resolve("tiny"), "nope").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("it has chat, sql"), absl::string_view::npos) << missing;

  // The same name on another model's workers: ambiguous.
  catalog.Observe("o", other.Info(), WithAdapters({{"sql", 'x'}}), *other.stub);
  EXPECT_EQ(catalog.Resolve("sql").status().code(), absl::StatusCode::kInvalidArgument);
  // Workers that leave take their adapters with them.
  catalog.Release("o");
  catalog.Release("w1");
  EXPECT_EQ(catalog.Resolve("chat").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(catalog.Resolve("sql").ok());
}

}  // namespace
}  // namespace kvfleet::router
