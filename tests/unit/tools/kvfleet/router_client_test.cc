#include "tools/kvfleet/router_client.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "absl/synchronization/mutex.h"

namespace kvfleet::tools {
namespace {

using flags::Flags;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Flags Parse(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> f =
      Flags::Parse(args, WithRouterFlags({"prompt", "prompt-token-ids", "system"}), RouterSwitches());
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *std::move(f) : *Flags::Parse({}, {}, {});
}

TEST(GenerationOptionsTest, DefaultsAreGreedyWithAMaxTokensBound) {
  absl::StatusOr<v1::GenerationOptions> o = GenerationOptionsFromFlags(Parse({}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->sampling().temperature(), 0.0f);
  EXPECT_FALSE(o->sampling().has_top_p());
  EXPECT_FALSE(o->sampling().has_repetition_penalty());
  EXPECT_FALSE(o->sampling().has_seed());
  EXPECT_EQ(o->stopping().max_tokens(), kDefaultMaxTokens);
  EXPECT_FALSE(o->stopping().ignore_eos());
  EXPECT_TRUE(o->stop().empty());
  EXPECT_EQ(o->cache_salt(), "");
  EXPECT_EQ(o->model(), "") << "the router's only model";
}

TEST(GenerationOptionsTest, EveryFlagLandsInItsField) {
  absl::StatusOr<v1::GenerationOptions> o = GenerationOptionsFromFlags(Parse({"--temperature",
                                                                              "0.7",
                                                                              "--top-k",
                                                                              "40",
                                                                              "--top-p",
                                                                              "0.9",
                                                                              "--min-p",
                                                                              "0.05",
                                                                              "--repetition-penalty",
                                                                              "1.1",
                                                                              "--presence-penalty",
                                                                              "0.5",
                                                                              "--frequency-penalty",
                                                                              "0.25",
                                                                              "--seed",
                                                                              "7",
                                                                              "--max-tokens",
                                                                              "12",
                                                                              "--stop-token-ids",
                                                                              "2,3",
                                                                              "--ignore-eos",
                                                                              "--stop",
                                                                              "\n\n",
                                                                              "--stop",
                                                                              "a,b",
                                                                              "--cache-salt",
                                                                              "tenant",
                                                                              "--model-name",
                                                                              "coder"}));
  ASSERT_TRUE(o.ok()) << o.status();
  const v1::SamplingParams& s = o->sampling();
  EXPECT_FLOAT_EQ(s.temperature(), 0.7f);
  EXPECT_EQ(s.top_k(), 40);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_FLOAT_EQ(s.min_p(), 0.05f);
  EXPECT_FLOAT_EQ(s.repetition_penalty(), 1.1f);
  EXPECT_FLOAT_EQ(s.presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty(), 0.25f);
  EXPECT_EQ(s.seed(), 7u);
  EXPECT_EQ(o->stopping().max_tokens(), 12);
  EXPECT_THAT(o->stopping().stop_token_ids(), ElementsAre(2, 3));
  EXPECT_TRUE(o->stopping().ignore_eos());
  EXPECT_THAT(o->stop(), ElementsAre("\n\n", "a,b")) << "each --stop is one string, commas included";
  EXPECT_EQ(o->cache_salt(), "tenant");
  EXPECT_EQ(o->model(), "coder");
}

TEST(GenerationOptionsTest, MalformedValuesNameTheFlag) {
  EXPECT_THAT(GenerationOptionsFromFlags(Parse({"--max-tokens", "many"})).status().message(),
              HasSubstr("--max-tokens"));
  EXPECT_THAT(GenerationOptionsFromFlags(Parse({"--top-k", "99999999999"})).status().message(),
              HasSubstr("out of range"));
  EXPECT_FALSE(GenerationOptionsFromFlags(Parse({"--stop", ""})).ok());
}

TEST(GenerateRequestTest, ExactlyOnePromptSource) {
  absl::StatusOr<v1::GenerateTextRequest> text = GenerateRequestFromFlags(Parse({"--prompt", "Once"}));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->prompt(), "Once");
  EXPECT_TRUE(text->prompt_token_ids().empty());
  EXPECT_EQ(text->options().stopping().max_tokens(), kDefaultMaxTokens);

  absl::StatusOr<v1::GenerateTextRequest> ids = GenerateRequestFromFlags(Parse({"--prompt-token-ids", "1, 2,3"}));
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(ids->prompt_token_ids(), ElementsAre(1, 2, 3));

  EXPECT_FALSE(GenerateRequestFromFlags(Parse({})).ok());
  EXPECT_FALSE(GenerateRequestFromFlags(Parse({"--prompt", "a", "--prompt-token-ids", "1"})).ok());
  EXPECT_FALSE(GenerateRequestFromFlags(Parse({"--prompt-token-ids", ""})).ok());
}

TEST(ChatRequestTest, SystemThenUser) {
  absl::StatusOr<v1::ChatRequest> r = ChatRequestFromFlags(Parse({"--system", "Be brief.", "--seed", "1"}), "Hi");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->messages_size(), 2);
  EXPECT_EQ(r->messages(0).role(), "system");
  EXPECT_EQ(r->messages(0).content(), "Be brief.");
  EXPECT_EQ(r->messages(1).role(), "user");
  EXPECT_EQ(r->messages(1).content(), "Hi");
  EXPECT_EQ(r->options().sampling().seed(), 1u);
  EXPECT_FALSE(r->has_add_generation_prompt()) << "the server's default: the model answers";

  absl::StatusOr<v1::ChatRequest> user_only = ChatRequestFromFlags(Parse({}), "Hi");
  ASSERT_TRUE(user_only.ok());
  EXPECT_EQ(user_only->messages_size(), 1);
}

TEST(CallSettingsTest, RouterTimeoutAndOutput) {
  absl::StatusOr<CallSettings> d = CallSettingsFromFlags(Parse({}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->router, "127.0.0.1:50060");
  EXPECT_EQ(d->timeout, absl::InfiniteDuration());
  EXPECT_EQ(d->output, OutputMode::kText);
  absl::StatusOr<CallSettings> s =
      CallSettingsFromFlags(Parse({"--router", "10.0.0.1:1", "--timeout", "2.5", "--output", "ids"}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->router, "10.0.0.1:1");
  EXPECT_EQ(s->timeout, absl::Milliseconds(2500));
  EXPECT_EQ(s->output, OutputMode::kIds);
  EXPECT_FALSE(CallSettingsFromFlags(Parse({"--output", "json"})).ok());
  EXPECT_FALSE(CallSettingsFromFlags(Parse({"--timeout", "-1"})).ok());
}

TEST(FormatSummaryTest, CountsFinishAndWorkers) {
  StreamResult r;
  r.usage.set_prompt_tokens(12);
  r.usage.set_cached_prompt_tokens(8);
  r.usage.set_generated_tokens(5);
  r.finish_reason = v1::FINISH_REASON_STOP;
  r.workers = {"worker-0"};
  EXPECT_EQ(FormatSummary(r), "[12 prompt tokens (8 cached), 5 generated, finish: stop, worker worker-0]");
  r.finish_reason = v1::FINISH_REASON_LENGTH;
  r.workers = {"worker-0", "worker-1"};
  EXPECT_EQ(FormatSummary(r),
            "[12 prompt tokens (8 cached), 5 generated, finish: length, workers worker-0 then worker-1]");
}

// What a FILE* received, through a temporary file.
class Capture {
 public:
  Capture() : file_(std::tmpfile()) {}
  ~Capture() { std::fclose(file_); }
  std::FILE* file() { return file_; }
  std::string Text() {
    std::fflush(file_);
    std::rewind(file_);
    std::string out;
    char buf[256];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), file_)) > 0) out.append(buf, n);
    return out;
  }

 private:
  std::FILE* file_;
};

v1::GenerateTextResponse Response(const std::string& text, std::vector<int32_t> ids, const std::string& worker) {
  v1::GenerateTextResponse r;
  r.set_text(text);
  for (int32_t id : ids) r.add_token_ids(id);
  r.set_worker_id(worker);
  return r;
}

TEST(StreamPrinterTest, TextStreamsAndIdsWaitForTheEnd) {
  v1::GenerateTextResponse last = Response("!", {3}, "worker-1");
  last.set_finish_reason(v1::FINISH_REASON_STOP);
  last.mutable_usage()->set_generated_tokens(3);

  Capture text;
  StreamPrinter printer(OutputMode::kText, text.file());
  printer.OnResponse(Response("Hello", {1}, "worker-0"));
  printer.OnResponse(Response(" world", {2}, "worker-0"));
  printer.OnResponse(last);
  printer.Finish();
  EXPECT_EQ(text.Text(), "Hello world!\n");
  EXPECT_THAT(printer.result().token_ids, ElementsAre(1, 2, 3));
  EXPECT_THAT(printer.result().workers, ElementsAre("worker-0", "worker-1"));
  EXPECT_EQ(printer.result().finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_EQ(printer.result().usage.generated_tokens(), 3);

  Capture ids;
  StreamPrinter id_printer(OutputMode::kIds, ids.file());
  id_printer.OnResponse(Response("Hello", {1, 2}, "worker-0"));
  id_printer.OnResponse(last);
  EXPECT_EQ(ids.Text(), "");
  id_printer.Finish();
  EXPECT_EQ(ids.Text(), "1,2,3\n");
}

// A router stand-in: Generate and Chat answer with canned messages, or fail
// with `error` when it is set; records the last Chat request.
class FakeInference final : public v1::Inference::Service {
 public:
  grpc::Status Generate(grpc::ServerContext*, const v1::GenerateTextRequest* request,
                        grpc::ServerWriter<v1::GenerateTextResponse>* writer) override {
    if (!error.ok()) return error;
    writer->Write(Response("Once", {10}, "worker-0"));
    v1::GenerateTextResponse last = Response(" upon", {11}, "worker-0");
    last.set_finish_reason(v1::FINISH_REASON_LENGTH);
    last.mutable_usage()->set_prompt_tokens(static_cast<int32_t>(request->prompt().size()));
    last.mutable_usage()->set_generated_tokens(2);
    writer->Write(last);
    return grpc::Status::OK;
  }

  grpc::Status Chat(grpc::ServerContext*, const v1::ChatRequest* request,
                    grpc::ServerWriter<v1::GenerateTextResponse>* writer) override {
    {
      absl::MutexLock lock(&mu_);
      last_chat_ = *request;
    }
    writer->Write(Response("Paris", {5}, "worker-1"));
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "every worker is full");
  }

  v1::ChatRequest last_chat() {
    absl::MutexLock lock(&mu_);
    return last_chat_;
  }

  grpc::Status error = grpc::Status::OK;  // set before calls

 private:
  absl::Mutex mu_;
  v1::ChatRequest last_chat_ ABSL_GUARDED_BY(mu_);
};

class RouterCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    call_.router = "127.0.0.1:" + std::to_string(port);
    call_.timeout = absl::Seconds(30);
  }
  void TearDown() override { server_->Shutdown(); }

  FakeInference service_;
  std::unique_ptr<grpc::Server> server_;
  CallSettings call_;
};

TEST_F(RouterCallTest, GenerateStreamsTheTextThenTheSummary) {
  v1::GenerateTextRequest request;
  request.set_prompt("abc");
  Capture out, err;
  ASSERT_TRUE(StreamGenerate(call_, request, out.file(), err.file()).ok());
  EXPECT_EQ(out.Text(), "Once upon\n");
  EXPECT_EQ(err.Text(), "[3 prompt tokens (0 cached), 2 generated, finish: length, worker worker-0]\n");

  call_.output = OutputMode::kIds;
  Capture ids, ids_err;
  ASSERT_TRUE(StreamGenerate(call_, request, ids.file(), ids_err.file()).ok());
  EXPECT_EQ(ids.Text(), "10,11\n");
}

TEST_F(RouterCallTest, AGrpcErrorKeepsItsCodeAndNamesIt) {
  service_.error = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt is empty");
  Capture out, err;
  const absl::Status status = StreamGenerate(call_, v1::GenerateTextRequest(), out.file(), err.file());
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(status.message(), "INVALID_ARGUMENT: router " + call_.router + ": prompt is empty");
  EXPECT_EQ(out.Text(), "");
  EXPECT_EQ(err.Text(), "") << "no summary after a failure";
}

TEST_F(RouterCallTest, AChatThatFailsMidStreamEndsTheLineAndReportsTheError) {
  absl::StatusOr<v1::ChatRequest> request = ChatRequestFromFlags(Parse({}), "Capital of France?");
  ASSERT_TRUE(request.ok());
  Capture out, err;
  const absl::Status status = StreamChat(call_, *request, out.file(), err.file());
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_EQ(out.Text(), "Paris\n");
  EXPECT_EQ(service_.last_chat().messages(0).content(), "Capital of France?");
}

TEST(RouterCallErrorsTest, NoRouterIsUnavailable) {
  CallSettings call{.router = "127.0.0.1:1", .timeout = absl::Seconds(10)};
  Capture out, err;
  const absl::Status status = StreamGenerate(call, v1::GenerateTextRequest(), out.file(), err.file());
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("UNAVAILABLE: router 127.0.0.1:1"));
}

}  // namespace
}  // namespace kvfleet::tools
