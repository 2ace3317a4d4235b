// The model card on the wire: a real model's card survives the trip whole,
// in chunks of any size, and a reader refuses what is missing, extra,
// inconsistent or of other weights, saying which.
#include "services/transport/wire/model_card_convert.h"

#include <gtest/gtest.h>

#include "common/sha256.h"
#include "model/model.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::transport {
namespace {

class ModelCardConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.Path("m.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 3, .context_length = 96}, path).ok());
    absl::StatusOr<std::unique_ptr<model::Model>> m = model::Model::Load(path, {.weights = false});
    ASSERT_TRUE(m.ok()) << m.status();
    card_ = model::CardOf(**m, "tiny", std::string(64, 'a'));
    card_.served_name = "tiny-chat";
    card_.vocabulary.chat_template = "{{ messages[0].content }}";
    card_.generation_defaults = {.eos_token_ids = {2, 3}, .temperature = 0.6, .top_k = 20};
  }

  static absl::StatusOr<model::ModelCard> Read(const std::vector<v1::ModelDescriptionChunk>& chunks) {
    ModelCardReader reader;
    for (const v1::ModelDescriptionChunk& c : chunks) {
      if (absl::Status s = reader.Add(c); !s.ok()) return s;
    }
    return reader.Finish();
  }

  testing::TempDir dir_;
  model::ModelCard card_;
};

TEST_F(ModelCardConvertTest, ACardArrivesWholeInChunksOfAnySize) {
  ASSERT_GT(card_.vocabulary.size(), 100);
  for (int64_t chunk : {int64_t{1} << 20, int64_t{997}, int64_t{1}}) {
    const std::vector<v1::ModelDescriptionChunk> chunks = ChunkModelCard(card_, chunk);
    const int64_t total = chunks.front().total_bytes();
    EXPECT_EQ(static_cast<int64_t>(chunks.size()), (total + chunk - 1) / chunk) << chunk;
    EXPECT_EQ(chunks.front().model_fingerprint(), card_.fingerprint);
    absl::StatusOr<model::ModelCard> back = Read(chunks);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->id, "tiny");
    EXPECT_EQ(back->served_name, "tiny-chat");
    EXPECT_EQ(back->fingerprint, card_.fingerprint);
    EXPECT_EQ(back->context_length, 96);
    const model::Vocabulary& v = back->vocabulary;
    const model::Vocabulary& want = card_.vocabulary;
    EXPECT_EQ(v.model, want.model);
    EXPECT_EQ(v.pre, want.pre);
    EXPECT_EQ(v.tokens, want.tokens);
    EXPECT_EQ(v.scores, want.scores);
    EXPECT_EQ(v.token_types, want.token_types);
    EXPECT_EQ(v.merges, want.merges);
    EXPECT_EQ(v.bos, want.bos);
    EXPECT_EQ(v.eos, want.eos);
    EXPECT_EQ(v.eot, want.eot);
    EXPECT_EQ(v.add_bos, want.add_bos);
    EXPECT_EQ(v.chat_template, "{{ messages[0].content }}");
    EXPECT_EQ(back->generation_defaults.eos_token_ids, (std::vector<model::TokenId>{2, 3}));
    EXPECT_EQ(back->generation_defaults.temperature, 0.6);
    EXPECT_FALSE(back->generation_defaults.top_p.has_value());
    EXPECT_EQ(back->generation_defaults.top_k, 20);
  }
}

TEST_F(ModelCardConvertTest, TokensNeedNotBeUtf8) {
  card_.vocabulary.tokens[5] = std::string("\xff\xfe", 2);
  absl::StatusOr<model::ModelCard> back = Read(ChunkModelCard(card_));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->vocabulary.tokens[5], std::string("\xff\xfe", 2));
}

TEST_F(ModelCardConvertTest, AReaderRefusesMissingExtraAndOtherBytesSayingWhich) {
  std::vector<v1::ModelDescriptionChunk> chunks = ChunkModelCard(card_, 300);
  ASSERT_GT(chunks.size(), 2u);

  std::vector<v1::ModelDescriptionChunk> cut(chunks.begin(), chunks.end() - 1);
  EXPECT_NE(Read(cut).status().message().find("ended after"), absl::string_view::npos) << Read(cut).status();

  std::vector<v1::ModelDescriptionChunk> extra = chunks;
  extra.push_back(chunks.back());
  EXPECT_NE(Read(extra).status().message().find("runs past"), absl::string_view::npos);

  std::vector<v1::ModelDescriptionChunk> other = chunks;
  other.front().set_model_fingerprint(std::string(64, 'b'));
  EXPECT_NE(Read(other).status().message().find("not the 'bbbb"), absl::string_view::npos) << Read(other).status();

  std::vector<v1::ModelDescriptionChunk> changed = chunks;
  (*changed[1].mutable_data())[0] ^= 1;
  EXPECT_EQ(Read(changed).status().code(), absl::StatusCode::kDataLoss) << Read(changed).status();

  std::vector<v1::ModelDescriptionChunk> huge = chunks;
  huge.front().set_total_bytes(ModelCardReader::kMaxBytes + 1);
  EXPECT_EQ(Read(huge).status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_NE(Read({}).status().message().find("no chunk"), absl::string_view::npos);

  v1::ModelDescriptionChunk garbage;
  garbage.set_data("\xff\xff\xff\xff");
  garbage.set_total_bytes(4);
  garbage.set_card_digest(Sha256Hex(garbage.data()));
  EXPECT_NE(Read({garbage}).status().message().find("does not parse"), absl::string_view::npos);
}

TEST_F(ModelCardConvertTest, AnInconsistentCardIsRefusedNamingTheField) {
  v1::ModelDescription d = ToProto(card_);
  d.mutable_vocabulary()->mutable_token_types()->RemoveLast();
  EXPECT_NE(FromProto(d).status().message().find("token types"), absl::string_view::npos) << FromProto(d).status();

  d = ToProto(card_);
  d.mutable_vocabulary()->set_eos(card_.vocabulary.size());
  EXPECT_NE(FromProto(d).status().message().find("vocabulary.eos"), absl::string_view::npos) << FromProto(d).status();

  d = ToProto(card_);
  d.mutable_generation_defaults()->add_eos_token_ids(-1);
  EXPECT_NE(FromProto(d).status().message().find("end-of-sequence id -1"), absl::string_view::npos);

  d = ToProto(card_);
  d.set_max_context(0);
  EXPECT_NE(FromProto(d).status().message().find("max_context"), absl::string_view::npos);

  d = ToProto(card_);
  d.clear_model_id();
  EXPECT_NE(FromProto(d).status().message().find("model_id"), absl::string_view::npos);
}

}  // namespace
}  // namespace kvfleet::transport
