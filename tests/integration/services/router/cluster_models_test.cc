// Several models behind one router that has no model file: real workers of
// two tiny models (other weights, other names) register with a real
// cachemanager; the router learns each model from its first worker, lists
// both, routes each request to its model's workers only, and keeps their
// KV apart. A worker claiming a served model's id with other weights gets
// no requests, and its blocks are never found under that model. Killing
// every worker of one model leaves the other serving; its requests get
// UNAVAILABLE naming it until a worker returns.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "common/block_hash.h"
#include "tests/integration/services/router/router_cluster.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

// The second model: the harness's shape with other weights, so the same
// token ids are valid prompts for both.
std::string WriteSecondModel(const TempDir& dir, const std::string& name) {
  const std::string path = dir.Path(name);
  tools::TinyModelOptions o = HarnessModelOptions();
  o.seed = 11;
  EXPECT_TRUE(tools::WriteTinyModel(o, path).ok());
  return path;
}

v1::GenerateTextRequest For(const std::string& model, uint64_t seed) {
  v1::GenerateTextRequest r = TinyTextRequest(seed, 40, 8);
  r.mutable_options()->set_model(model);
  return r;
}

std::set<std::string> Served(const TextStreamResult& r) { return {r.worker_ids.begin(), r.worker_ids.end()}; }

class RouterModelsTest : public ::testing::Test {
 protected:
  void SetUp() override { coder_path_ = WriteSecondModel(dir_, "coder.gguf"); }

  // Workers 0 and 1 serve "tiny" (as "tiny-chat", with a plain template),
  // 2 and 3 "coder".
  absl::Status StartTwoModels(RouterCluster& cluster) {
    return cluster.Start(
        {.workers = 4,
         .model_path_of = {{2, coder_path_}, {3, coder_path_}},
         .worker_args_of = {{0, {"--served-model-name", "tiny-chat", "--chat-template", Template()}},
                            {1, {"--served-model-name", "tiny-chat", "--chat-template", Template()}}}});
  }

  std::string Template() {
    const std::string path = dir_.Path("plain.jinja");
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("{% for m in messages %}{{ m.content }}{% endfor %}", f);
    std::fclose(f);
    return path;
  }

  TempDir dir_;
  std::string coder_path_;
};

TEST_F(RouterModelsTest, EachModelIsLearntListedAndServedByItsOwnWorkers) {
  RouterCluster cluster;
  ASSERT_TRUE(StartTwoModels(cluster).ok());
  absl::StatusOr<v1::ListModelsResponse> models = cluster.ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->models_size(), 2);
  EXPECT_EQ(models->models(0).id(), "coder");
  EXPECT_EQ(models->models(0).live_workers(), 2);
  EXPECT_EQ(models->models(1).id(), "tiny-chat") << "the worker's --served-model-name";
  EXPECT_EQ(models->models(1).live_workers(), 2);
  EXPECT_EQ(models->models(1).max_context(), kTinyContext);

  const std::set<std::string> tiny_workers = {"worker-0", "worker-1"}, coder_workers = {"worker-2", "worker-3"};
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const TextStreamResult t = cluster.Generate(For("tiny-chat", seed));
    ASSERT_TRUE(t.status.ok()) << t.status.error_message();
    for (const std::string& w : Served(t)) EXPECT_TRUE(tiny_workers.contains(w)) << w;
    const TextStreamResult c = cluster.Generate(For("coder", seed));
    ASSERT_TRUE(c.status.ok()) << c.status.error_message();
    for (const std::string& w : Served(c)) EXPECT_TRUE(coder_workers.contains(w)) << w;
    EXPECT_NE(t.tokens, c.tokens) << "other weights, other tokens";
    // Each equals its model's worker answering directly.
    const int coder_index = c.worker_ids.front() == "worker-2" ? 2 : 3;
    v1::GenerateRequest direct = TinyRequest(seed, 40, 8);
    EXPECT_EQ(cluster.worker(coder_index).Generate(direct).tokens, c.tokens);
  }
  // The id answers too; no name is refused when there are two; an unknown one is NOT_FOUND.
  EXPECT_TRUE(cluster.Generate(For("tiny", 5)).status.ok());
  const TextStreamResult unnamed = cluster.Generate(TinyTextRequest(5, 40, 8));
  EXPECT_EQ(unnamed.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unnamed.status.error_message().find("name one of coder, tiny-chat"), std::string::npos)
      << unnamed.status.error_message();
  const TextStreamResult unknown = cluster.Generate(For("llama-70b", 5));
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.status.error_message().find("this router serves coder, tiny-chat"), std::string::npos);

  // The router renders chats with the template the worker gave it: the
  // prompt is the content's tokens alone.
  v1::ChatRequest chat;
  chat.mutable_options()->set_model("tiny-chat");
  chat.mutable_options()->mutable_stopping()->set_max_tokens(2);
  chat.add_messages()->set_content("hello there");
  chat.mutable_messages(0)->set_role("user");
  const TextStreamResult answered = cluster.Chat(chat);
  ASSERT_TRUE(answered.status.ok()) << answered.status.error_message();
  v1::TokenizeRequest tokenize;
  tokenize.set_model("tiny-chat");
  tokenize.set_text("hello there");
  tokenize.set_add_bos(true);
  grpc::ClientContext context;
  v1::TokenizeResponse ids;
  ASSERT_TRUE(cluster.Stub()->Tokenize(&context, tokenize, &ids).ok());
  EXPECT_EQ(answered.usage.prompt_tokens(), ids.token_ids_size());
}

TEST_F(RouterModelsTest, AWorkerWithOtherWeightsUnderAServedIdNeverSharesItsKv) {
  RouterCluster cluster;
  // Worker 1 claims "tiny" while holding the coder's weights.
  ASSERT_TRUE(
      cluster
          .Start({.workers = 1, .model_path_of = {{1, coder_path_}}, .worker_args_of = {{1, {"--model-id", "tiny"}}}})
          .ok());
  ASSERT_TRUE(cluster.StartWorker(1).ok());
  const absl::StatusOr<v1::WorkerInfo> honest = cluster.worker(0).Info(), impostor = cluster.worker(1).Info();
  ASSERT_TRUE(honest.ok() && impostor.ok());
  EXPECT_EQ(impostor->model_id(), "tiny");
  EXPECT_NE(impostor->model_fingerprint(), honest->model_fingerprint());
  // The router names both workers and routes only to the first.
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::ifstream log(cluster.RouterLogPath());
        std::stringstream text;
        text << log.rdbuf();
        return text.str().find("worker worker-1 serves model tiny with weights") != std::string::npos &&
               text.str().find("but worker worker-0 serves it") != std::string::npos;
      },
      milliseconds(10000)));
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const TextStreamResult r = cluster.Generate(For("tiny", seed));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(Served(r), std::set<std::string>{"worker-0"});
  }
  // The impostor computes a prompt itself; its blocks hash from its own
  // weights, so the cachemanager never finds them under the honest ones.
  const v1::GenerateRequest prompt = TinyRequest(9, 64, 1);
  ASSERT_TRUE(cluster.worker(1).Generate(prompt).status.ok());
  const std::vector<int32_t> tokens(prompt.prompt_token_ids().begin(), prompt.prompt_token_ids().end());
  auto holders = [&](const std::string& fingerprint) {
    v1::FindOverlapsRequest request;
    request.set_model_id("tiny");
    for (const BlockHash& h : HashFullBlocks(RootBlockHash("tiny", fingerprint, ""), tokens, 16)) {
      request.add_block_hashes(h.ToBytes());
    }
    auto stub = v1::CacheManager::NewStub(NewTestChannel(cluster.cachemanager_address()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::FindOverlapsResponse response;
    EXPECT_TRUE(stub->FindOverlaps(&context, request, &response).ok());
    std::map<std::string, int> out;
    for (const auto& w : response.workers()) out[w.worker_id()] = w.matched_blocks();
    return out;
  };
  ASSERT_TRUE(WaitUntil([&] { return holders(impostor->model_fingerprint())["worker-1"] == 4; }, milliseconds(10000)));
  EXPECT_EQ(holders(honest->model_fingerprint())["worker-1"], 0) << "the honest model's hashes never find it";
}

TEST_F(RouterModelsTest, ChaosEveryWorkerOfOneModelKilledLeavesTheOtherServingUntilItsWorkersReturn) {
  RouterCluster cluster;
  ASSERT_TRUE(StartTwoModels(cluster).ok());
  cluster.KillWorker(2);
  cluster.KillWorker(3);
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<v1::ListModelsResponse> m = cluster.ListModels();
        return m.ok() && m->models_size() == 1 && m->models(0).id() == "tiny-chat";
      },
      milliseconds(10000)))
      << "a model with no live worker leaves the listing";
  const TextStreamResult gone = cluster.Generate(For("coder", 1), milliseconds(20000));
  EXPECT_EQ(gone.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(gone.status.error_message().find("no worker of model coder"), std::string::npos)
      << gone.status.error_message();
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const TextStreamResult t = cluster.Generate(For("tiny-chat", seed));
    EXPECT_TRUE(t.status.ok()) << t.status.error_message();
  }
  ASSERT_TRUE(cluster.StartWorker(2).ok());
  ASSERT_TRUE(WaitUntil([&] { return cluster.Generate(For("coder", 2)).status.ok(); }, milliseconds(20000)))
      << "its worker returned";
  absl::StatusOr<v1::ListModelsResponse> models = cluster.ListModels();
  ASSERT_TRUE(models.ok());
  EXPECT_EQ(models->models_size(), 2);
}

}  // namespace
}  // namespace kvfleet::testing
