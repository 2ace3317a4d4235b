// The public API through a real router, cachemanager and two workers: text
// and token ids out, usage and the serving worker, chat through the
// template, stop strings, tokenization, and malformed calls answered with a
// clear status while everyone else keeps being served.
#include <gtest/gtest.h>

#include "tests/integration/services/router/router_cluster.h"

namespace kvfleet::testing {
namespace {

class RouterApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new RouterCluster();
    // Some limits lowered, so the tests can send one over each.
    const absl::Status s =
        cluster_->Start({.workers = 2,
                         .router_args = {"--max-stop-strings", "4", "--max-chat-messages", "8", "--max-prompt-bytes",
                                         "65536", "--max-metadata-bytes", "8192", "--max-priority", "10"}});
    ASSERT_TRUE(s.ok()) << s;
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  static std::string Detokenize(const std::vector<int32_t>& ids) {
    v1::DetokenizeRequest request;
    request.mutable_token_ids()->Assign(ids.begin(), ids.end());
    request.set_skip_special(true);
    grpc::ClientContext context;
    v1::DetokenizeResponse response;
    EXPECT_TRUE(cluster_->Stub()->Detokenize(&context, request, &response).ok());
    return response.text();
  }

  static RouterCluster* cluster_;
};

RouterCluster* RouterApiTest::cluster_ = nullptr;

TEST_F(RouterApiTest, GenerateStreamsTokensTextUsageAndTheWorker) {
  const TextStreamResult r = cluster_->Generate(TinyTextRequest(1, 20, 24));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens.size(), 24u);
  EXPECT_EQ(r.finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.usage.prompt_tokens(), 20);
  EXPECT_EQ(r.usage.generated_tokens(), 24);
  EXPECT_EQ(r.text, Detokenize(r.tokens));
  ASSERT_FALSE(r.worker_ids.empty());
  EXPECT_TRUE(r.worker_ids.front() == "worker-0" || r.worker_ids.front() == "worker-1") << r.worker_ids.front();

  // The same greedy request directly on that worker gives the same tokens.
  const int index = r.worker_ids.front() == "worker-0" ? 0 : 1;
  const StreamResult direct = cluster_->worker(index).Generate(TinyRequest(1, 20, 24));
  ASSERT_TRUE(direct.status.ok());
  EXPECT_EQ(direct.tokens, r.tokens);
}

TEST_F(RouterApiTest, TextPromptsAreTokenizedByTheRouter) {
  v1::GenerateTextRequest request;
  request.set_prompt("hello world, this is a prompt");
  request.mutable_options()->mutable_stopping()->set_max_tokens(8);
  request.mutable_options()->mutable_stopping()->set_ignore_eos(true);
  const TextStreamResult r = cluster_->Generate(request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens.size(), 8u);

  v1::TokenizeRequest tokenize;
  tokenize.set_text("hello world, this is a prompt");
  tokenize.set_add_bos(true);
  grpc::ClientContext context;
  v1::TokenizeResponse ids;
  ASSERT_TRUE(cluster_->Stub()->Tokenize(&context, tokenize, &ids).ok());
  EXPECT_EQ(r.usage.prompt_tokens(), ids.token_ids_size());
  EXPECT_EQ(Detokenize({ids.token_ids().begin(), ids.token_ids().end()}), "hello world, this is a prompt");
}

TEST_F(RouterApiTest, CompleteEqualsTheStreamedGeneration) {
  const v1::GenerateTextRequest request = TinyTextRequest(2, 12, 16);
  const TextStreamResult streamed = cluster_->Generate(request);
  ASSERT_TRUE(streamed.status.ok());
  grpc::ClientContext context;
  v1::CompleteResponse complete;
  ASSERT_TRUE(cluster_->Stub()->Complete(&context, request, &complete).ok());
  EXPECT_EQ(std::vector<int32_t>(complete.token_ids().begin(), complete.token_ids().end()), streamed.tokens);
  EXPECT_EQ(complete.text(), streamed.text);
  EXPECT_EQ(complete.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(complete.usage().generated_tokens(), 16);
}

TEST_F(RouterApiTest, ChatRendersTheTemplateAndSeededSamplingRepeats) {
  v1::ChatRequest request;
  auto* m = request.add_messages();
  m->set_role("user");
  m->set_content("Say something.");
  request.mutable_options()->mutable_stopping()->set_max_tokens(12);
  request.mutable_options()->mutable_stopping()->set_ignore_eos(true);
  request.mutable_options()->mutable_sampling()->set_temperature(0.9f);
  request.mutable_options()->mutable_sampling()->set_seed(7);
  const TextStreamResult a = cluster_->Chat(request);
  const TextStreamResult b = cluster_->Chat(request);
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  ASSERT_TRUE(b.status.ok());
  EXPECT_EQ(a.tokens.size(), 12u);
  EXPECT_EQ(a.tokens, b.tokens);

  // The prompt is the ChatML rendering of the message.
  v1::TokenizeRequest tokenize;
  tokenize.set_text("<|im_start|>user\nSay something.<|im_end|>\n<|im_start|>assistant\n");
  tokenize.set_parse_special(true);
  grpc::ClientContext context;
  v1::TokenizeResponse ids;
  ASSERT_TRUE(cluster_->Stub()->Tokenize(&context, tokenize, &ids).ok());
  EXPECT_EQ(a.usage.prompt_tokens(), ids.token_ids_size());
}

TEST_F(RouterApiTest, AStopStringEndsTheTextBeforeIt) {
  const TextStreamResult full = cluster_->Generate(TinyTextRequest(3, 10, 40));
  ASSERT_TRUE(full.status.ok());
  ASSERT_GE(full.text.size(), 12u);
  // A piece from the middle of the text: the stopped text is what precedes its first occurrence.
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  v1::GenerateTextRequest request = TinyTextRequest(3, 10, 40);
  request.mutable_options()->add_stop(stop);
  const TextStreamResult cut = cluster_->Generate(request);
  ASSERT_TRUE(cut.status.ok());
  EXPECT_EQ(cut.finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_LT(cut.tokens.size(), full.tokens.size());
}

TEST_F(RouterApiTest, ListModelsNamesTheModelAndItsWorkers) {
  grpc::ClientContext context;
  v1::ListModelsResponse response;
  ASSERT_TRUE(cluster_->Stub()->ListModels(&context, v1::ListModelsRequest(), &response).ok());
  ASSERT_EQ(response.models_size(), 1);
  EXPECT_EQ(response.models(0).id(), "tiny");
  EXPECT_EQ(response.models(0).max_context(), kTinyContext);
  EXPECT_EQ(response.models(0).live_workers(), 2);
}

struct BadCall {
  const char* name;
  std::function<void(v1::GenerateTextRequest&)> edit;
  grpc::StatusCode code;
  const char* message_part;
};

TEST_F(RouterApiTest, MalformedCallsGetAClearStatusAndOthersAreStillServed) {
  const std::vector<BadCall> cases = {
      {"both prompt forms", [](auto& r) { r.set_prompt("x"); }, grpc::StatusCode::INVALID_ARGUMENT, "exactly one"},
      {"no prompt", [](auto& r) { r.clear_prompt_token_ids(); }, grpc::StatusCode::INVALID_ARGUMENT, "exactly one"},
      {"id outside the vocabulary", [](auto& r) { r.set_prompt_token_ids(0, 1 << 20); },
       grpc::StatusCode::INVALID_ARGUMENT, "prompt_token_ids[0]"},
      {"unknown model", [](auto& r) { r.mutable_options()->set_model("gpt-9"); }, grpc::StatusCode::NOT_FOUND,
       "'gpt-9' is not served here; this router serves tiny"},
      {"prompt over the context",
       [](auto& r) {
         for (int i = 0; i < kTinyContext; ++i) r.add_prompt_token_ids(5);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "context of 4096"},
      {"prompt plus max_tokens over the context",
       [](auto& r) { r.mutable_options()->mutable_stopping()->set_max_tokens(5000); },
       grpc::StatusCode::INVALID_ARGUMENT, "4096"},
      {"empty stop string", [](auto& r) { r.mutable_options()->add_stop(""); }, grpc::StatusCode::INVALID_ARGUMENT,
       "options.stop"},
      {"temperature below 0", [](auto& r) { r.mutable_options()->mutable_sampling()->set_temperature(-1); },
       grpc::StatusCode::INVALID_ARGUMENT, "temperature"},
      {"five stop strings (--max-stop-strings 4)",
       [](auto& r) {
         for (const char* stop : {"a", "b", "c", "d", "e"}) r.mutable_options()->add_stop(stop);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "--max-stop-strings"},
      {"a stop string of 257 bytes", [](auto& r) { r.mutable_options()->add_stop(std::string(257, 's')); },
       grpc::StatusCode::INVALID_ARGUMENT, "--max-stop-string-bytes"},
      {"priority 11 (--max-priority 10)", [](auto& r) { r.mutable_options()->set_priority(11); },
       grpc::StatusCode::INVALID_ARGUMENT, "--max-priority"},
      {"a request id of 129 bytes", [](auto& r) { r.mutable_options()->set_request_id(std::string(129, 'i')); },
       grpc::StatusCode::INVALID_ARGUMENT, "--max-request-id-bytes"},
      {"a cache salt of 257 bytes", [](auto& r) { r.mutable_options()->set_cache_salt(std::string(257, 'c')); },
       grpc::StatusCode::INVALID_ARGUMENT, "--max-cache-salt-bytes"},
      {"top_logprobs 21", [](auto& r) { r.mutable_options()->set_top_logprobs(21); },
       grpc::StatusCode::INVALID_ARGUMENT, "--max-top-logprobs"},
      {"65 stop ids",
       [](auto& r) {
         for (int i = 0; i < 65; ++i) r.mutable_options()->mutable_stopping()->add_stop_token_ids(5);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "--max-stop-token-ids"},
      {"a text prompt of 65537 bytes (--max-prompt-bytes 65536)",
       [](auto& r) {
         r.clear_prompt_token_ids();
         r.set_prompt(std::string(65537, 'p'));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "--max-prompt-bytes"},
      {"a message over 4 MiB",
       [](auto& r) {
         r.clear_prompt_token_ids();
         r.set_prompt(std::string((4 << 20) + 1, 'p'));
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED, ""},
  };
  for (const BadCall& c : cases) {
    SCOPED_TRACE(c.name);
    v1::GenerateTextRequest request = TinyTextRequest(4, 8, 4);
    c.edit(request);
    const TextStreamResult r = cluster_->Generate(request);
    EXPECT_EQ(r.status.error_code(), c.code) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find(c.message_part), std::string::npos) << r.status.error_message();
    const TextStreamResult ok = cluster_->Generate(TinyTextRequest(5, 8, 4));
    EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
    EXPECT_EQ(ok.tokens.size(), 4u);
  }
  v1::ChatRequest empty_chat;
  EXPECT_EQ(cluster_->Chat(empty_chat).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::ChatRequest long_chat;
  for (int i = 0; i < 9; ++i) {
    v1::ChatMessage* m = long_chat.add_messages();
    m->set_role(i % 2 == 0 ? "user" : "assistant");
    m->set_content("hi");
  }
  const TextStreamResult nine = cluster_->Chat(long_chat);
  EXPECT_EQ(nine.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(nine.status.error_message().find("--max-chat-messages"), std::string::npos) << nine.status.error_message();
  long_chat.mutable_messages()->RemoveLast();
  EXPECT_TRUE(cluster_->Chat(long_chat).status.ok()) << "eight messages are within the limit";
}

// Headers count too: one entry over --max-metadata-bytes is refused by gRPC
// itself before the router reads the request.
TEST_F(RouterApiTest, MetadataOverTheLimitIsRefusedAndTheRouterServesOn) {
  auto stub = cluster_->Stub();
  v1::ListModelsResponse response;
  grpc::ClientContext small;
  small.AddMetadata("x-padding", std::string(4000, 'm'));
  EXPECT_TRUE(stub->ListModels(&small, v1::ListModelsRequest(), &response).ok());
  grpc::ClientContext big;
  big.AddMetadata("x-padding", std::string(8193, 'm'));
  EXPECT_EQ(stub->ListModels(&big, v1::ListModelsRequest(), &response).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(cluster_->Generate(TinyTextRequest(5, 8, 4)).status.ok());
}

}  // namespace
}  // namespace kvfleet::testing
