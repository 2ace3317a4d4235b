// GenerationRunner against scripted fake workers (gMock stubs of the Worker
// client, no network): resumption with exactly the tokens already sent,
// stop strings across messages, refusals, pass-through of the request's own
// errors, a client that goes away, and a split (prefill on a prefill
// worker, handoff, decode elsewhere pulling under the lease).
#include "services/router/server/generation_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "kvfleet/v1/worker_mock.grpc.pb.h"
#include "services/router/placement/placement.h"
#include "services/router/server/http_call_context.h"
#include "services/router/server/route_selector.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::router {
namespace {

using ::testing::_;
using ::testing::NiceMock;

// One worker call's script: the messages it streams, then its status.
struct Script {
  std::vector<v1::GenerateResponse> messages;
  grpc::Status status;
};

class FakeReader : public grpc::ClientReaderInterface<v1::GenerateResponse> {
 public:
  explicit FakeReader(Script script) : script_(std::move(script)) {}
  bool NextMessageSize(uint32_t* size) override {
    *size = 1 << 20;
    return next_ < script_.messages.size();
  }
  bool Read(v1::GenerateResponse* m) override {
    if (next_ >= script_.messages.size()) return false;
    *m = script_.messages[next_++];
    return true;
  }
  void WaitForInitialMetadata() override {}
  grpc::Status Finish() override { return script_.status; }

 private:
  Script script_;
  size_t next_ = 0;
};

v1::GenerateResponse Tokens(std::vector<int32_t> ids) {
  v1::GenerateResponse r;
  r.mutable_token_ids()->Assign(ids.begin(), ids.end());
  return r;
}

v1::GenerateResponse Final(std::vector<int32_t> ids, v1::FinishReason reason, int cached) {
  v1::GenerateResponse r = Tokens(std::move(ids));
  r.set_finish_reason(reason);
  r.mutable_usage()->set_cached_prompt_tokens(cached);
  return r;
}

class GenerationRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.Path("m.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 1}, path).ok());
    model_ = *RouterModel::Load(path);
    for (const char* id : {"w0", "w1"}) {
      auto stub = std::make_shared<NiceMock<v1::MockWorkerStub>>();
      ON_CALL(*stub, GetInfo(_, _, _)).WillByDefault([this, id](auto*, const auto&, v1::WorkerInfo* info) {
        info->set_model_id(model_->id());
        info->set_block_size(4);
        info->set_max_num_seqs(8);
        info->set_numerics(numerics_[id]);
        info->set_role(roles_[id]);
        info->set_kv_transfer_endpoint(std::string(id) + ":7002");
        return grpc::Status::OK;
      });
      ON_CALL(*stub, GetStats(_, _, _)).WillByDefault([](auto*, const auto&, v1::WorkerStats* stats) {
        stats->set_blocks_total(100);
        stats->set_blocks_free(100);
        return grpc::Status::OK;
      });
      stubs_[id] = stub;
    }
    pool_ = std::make_unique<WorkerPool>(
        WorkerPoolOptions{.probe_interval = std::chrono::milliseconds(10),
                          .stub_factory = [this](const std::string& endpoint) { return stubs_.at(endpoint); }});
    pool_->Upsert("w0", "w0", 0);
    pool_->Upsert("w1", "w1", 0);
    pool_->Start();
    for (int i = 0; i < 500 && pool_->Routable("").size() < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(pool_->Routable("").size(), 2u);
    selector_ = std::make_unique<RouteSelector>(*pool_, placement_, nullptr, metrics_, RouteSelectorOptions{});
    runner_ =
        std::make_unique<GenerationRunner>(*selector_, *pool_, metrics_, GenerationRunnerOptions{.max_attempts = 3});
  }
  void TearDown() override { pool_->Stop(); }

  // Worker `id` answers its next Generate call with `script`, recording the request.
  void Expect(const std::string& id, Script script, v1::GenerateRequest* seen = nullptr) {
    EXPECT_CALL(*stubs_.at(id), GenerateRaw(_, _))
        .WillOnce([script = std::move(script), seen](grpc::ClientContext*, const v1::GenerateRequest& r) {
          if (seen) *seen = r;
          return new FakeReader(script);
        })
        .RetiresOnSaturation();
  }
  std::vector<bool> DecodeCalledAtEachMessage(bool stream_first_token_early);
  void ExpectNoCall(const std::string& id) { EXPECT_CALL(*stubs_.at(id), GenerateRaw(_, _)).Times(0); }

  // The workers report these numerics identities (a new incarnation each, so
  // the pool asks GetInfo again).
  void SetNumerics(const std::map<std::string, std::string>& numerics) {
    for (const auto& [id, n] : numerics) numerics_[id] = n;
    AwaitInfo();
  }
  // The workers report these roles, and the router splits prompts with at
  // least `split_tokens` uncached.
  void SetRoles(const std::map<std::string, std::string>& roles, int32_t split_tokens) {
    for (const auto& [id, r] : roles) roles_[id] = r;
    AwaitInfo();
    selector_ = std::make_unique<RouteSelector>(*pool_, placement_, nullptr, metrics_,
                                                RouteSelectorOptions{.split = {.min_uncached_tokens = split_tokens}});
    runner_ =
        std::make_unique<GenerationRunner>(*selector_, *pool_, metrics_, GenerationRunnerOptions{.max_attempts = 3});
  }
  void AwaitInfo() {
    ++incarnation_;
    pool_->Upsert("w0", "w0", incarnation_);
    pool_->Upsert("w1", "w1", incarnation_);
    const auto current = [&] {
      std::vector<PooledWorker> routable = pool_->Routable("");
      return routable.size() == 2 && std::all_of(routable.begin(), routable.end(), [&](const PooledWorker& w) {
               return w.numerics == numerics_[w.worker_id] &&
                      w.role == ParseWorkerRole(roles_[w.worker_id]).value_or(WorkerRole::kBoth);
             });
    };
    for (int i = 0; i < 500 && !current(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(current());
  }

  GenerationPlan Plan(std::vector<std::string> stops = {}) {
    v1::GenerateTextRequest r;
    for (int32_t id : {10, 11, 12, 13, 14, 15}) r.add_prompt_token_ids(id);
    for (std::string& s : stops) r.mutable_options()->add_stop(std::move(s));
    return *PlanGenerate(ServedModel{.model = model_}, r, 1);
  }

  grpc::Status Run(const GenerationPlan& plan, std::vector<v1::GenerateTextResponse>& out, int accept = 1 << 30) {
    grpc::ServerContext context;
    return runner_->Run(context, plan, GenerationRunner::Clock::now(), [&](const v1::GenerateTextResponse& r) {
      if (static_cast<int>(out.size()) >= accept) return false;
      out.push_back(r);
      return true;
    });
  }

  static std::vector<int32_t> AllTokens(const std::vector<v1::GenerateTextResponse>& out) {
    std::vector<int32_t> ids;
    for (const auto& m : out) ids.insert(ids.end(), m.token_ids().begin(), m.token_ids().end());
    return ids;
  }

  std::string Decode(const std::vector<int32_t>& ids) {
    return *model_->tokenizer().Decode(ids, {.skip_special = true});
  }

  testing::TempDir dir_;
  std::shared_ptr<const RouterModel> model_;
  std::map<std::string, std::shared_ptr<NiceMock<v1::MockWorkerStub>>> stubs_;
  std::map<std::string, std::string> numerics_;
  std::map<std::string, std::string> roles_;
  uint64_t incarnation_ = 0;
  RouterMetrics metrics_;
  Placement placement_{PlacementOptions{}};
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<RouteSelector> selector_;
  std::unique_ptr<GenerationRunner> runner_;
};

TEST_F(GenerationRunnerTest, AStreamCutMidwayResumesElsewhereWithTheTokensAlreadySent) {
  Expect("w0", {.messages = {Tokens({20}), Tokens({21, 22})},
                .status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset")});
  v1::GenerateRequest resumed;
  Expect("w1", {.messages = {Tokens({23}), Final({24}, v1::FINISH_REASON_LENGTH, 4)}}, &resumed);
  std::vector<v1::GenerateTextResponse> out;
  const grpc::Status s = Run(Plan(), out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(std::vector<int32_t>(resumed.resumed_output_token_ids().begin(), resumed.resumed_output_token_ids().end()),
            (std::vector<int32_t>{20, 21, 22}));
  EXPECT_EQ(resumed.prompt_token_ids_size(), 6);  // the prompt itself, unchanged
  EXPECT_EQ(AllTokens(out), (std::vector<int32_t>{20, 21, 22, 23, 24}));
  std::string text;
  for (const auto& m : out) text += m.text();
  EXPECT_EQ(text, Decode({20, 21, 22, 23, 24}));
  EXPECT_EQ(out.front().worker_id(), "w0");
  EXPECT_EQ(out.back().worker_id(), "w1");
  EXPECT_EQ(out.back().finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(out.back().usage().prompt_tokens(), 6);
  EXPECT_EQ(out.back().usage().cached_prompt_tokens(), 4);
  EXPECT_EQ(out.back().usage().generated_tokens(), 5);
  for (size_t i = 0; i + 1 < out.size(); ++i) EXPECT_EQ(out[i].finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
}

TEST_F(GenerationRunnerTest, AStreamResumesOnlyOnAWorkerWithTheSameNumerics) {
  // w1 runs other kernels (a GPU beside a CPU): its continuation would be
  // close, not identical, so a broken stream is not continued there.
  SetNumerics({{"w0", "cpu/1"}, {"w1", "cuda-sm90/1"}});
  Expect("w0", {.messages = {Tokens({20})}, .status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset")});
  ExpectNoCall("w1");
  std::vector<v1::GenerateTextResponse> out;
  const grpc::Status s = Run(Plan(), out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("cpu/1"), std::string::npos) << s.error_message();
  EXPECT_EQ(AllTokens(out), (std::vector<int32_t>{20}));
}

TEST_F(GenerationRunnerTest, BeforeTheFirstTokenAnyNumericsMayServe) {
  SetNumerics({{"w0", "cpu/1"}, {"w1", "cuda-sm90/1"}});
  Expect("w0", {.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "draining")});
  Expect("w1", {.messages = {Final({30, 31}, v1::FINISH_REASON_STOP, 0)}});
  std::vector<v1::GenerateTextResponse> out;
  ASSERT_TRUE(Run(Plan(), out).ok());
  EXPECT_EQ(out.back().worker_id(), "w1");
}

// A fresh router: its first decision's tie goes to w0 (ties rotate after).
TEST_F(GenerationRunnerTest, WorkersOfOneNumericsResumeEachOther) {
  SetNumerics({{"w0", "cuda-sm90/1"}, {"w1", "cuda-sm90/1"}});
  Expect("w0", {.messages = {Tokens({40})}, .status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "reset")});
  Expect("w1", {.messages = {Final({41}, v1::FINISH_REASON_LENGTH, 0)}});
  std::vector<v1::GenerateTextResponse> out;
  ASSERT_TRUE(Run(Plan(), out).ok());
  EXPECT_EQ(AllTokens(out), (std::vector<int32_t>{40, 41}));
}

// The HTTP front end hands the runner its own CallContext: the server's
// deadline on every worker call, and a cancel from the client's disconnect.
TEST_F(GenerationRunnerTest, TheHttpCallContextServesSetsTheDeadlineAndEndsTheCall) {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(30);
  std::chrono::system_clock::time_point worker_deadline;
  EXPECT_CALL(*stubs_.at("w0"), GenerateRaw(_, _))
      .WillOnce([&](grpc::ClientContext* context, const v1::GenerateRequest&) {
        worker_deadline = context->deadline();
        return new FakeReader({.messages = {Final({50, 51}, v1::FINISH_REASON_LENGTH, 0)}});
      })
      .RetiresOnSaturation();
  std::vector<v1::GenerateTextResponse> out;
  const auto sink = [&](const v1::GenerateTextResponse& r) {
    out.push_back(r);
    return true;
  };
  const HttpCallContext live(deadline);
  ASSERT_TRUE(runner_->Run(live, Plan(), GenerationRunner::Clock::now(), sink).ok());
  EXPECT_EQ(AllTokens(out), (std::vector<int32_t>{50, 51}));
  EXPECT_EQ(worker_deadline, deadline);
  // Its deadline already passed, or its client went: no worker is called.
  ExpectNoCall("w0");
  ExpectNoCall("w1");
  const HttpCallContext late(std::chrono::system_clock::now() - std::chrono::seconds(1));
  EXPECT_EQ(runner_->Run(late, Plan(), GenerationRunner::Clock::now(), sink).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  HttpCallContext gone(deadline);
  gone.Cancel();
  EXPECT_EQ(runner_->Run(gone, Plan(), GenerationRunner::Clock::now(), sink).error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(GenerationRunnerTest, AFailureBeforeTheFirstTokenIsRetriedWithNothingResumed) {
  Expect("w0", {.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "draining")});
  v1::GenerateRequest retried;
  Expect("w1", {.messages = {Final({30, 31}, v1::FINISH_REASON_STOP, 0)}}, &retried);
  std::vector<v1::GenerateTextResponse> out;
  ASSERT_TRUE(Run(Plan(), out).ok());
  EXPECT_EQ(retried.resumed_output_token_ids_size(), 0);
  EXPECT_EQ(AllTokens(out), (std::vector<int32_t>{30, 31}));
  EXPECT_EQ(out.back().worker_id(), "w1");
}

TEST_F(GenerationRunnerTest, AStreamEndingWithoutAFinishIsAFailure) {
  Expect("w0", {.messages = {Tokens({40})}});  // OK status, no finish_reason
  Expect("w1", {.messages = {Final({41}, v1::FINISH_REASON_LENGTH, 0)}});
  std::vector<v1::GenerateTextResponse> out;
  ASSERT_TRUE(Run(Plan(), out).ok());
  EXPECT_EQ(AllTokens(out), (std::vector<int32_t>{40, 41}));
}

TEST_F(GenerationRunnerTest, AStopStringAcrossMessagesEndsTheTextBeforeIt) {
  const std::vector<int32_t> ids = *model_->tokenizer().Encode("hello world and more");
  ASSERT_GE(ids.size(), 3u);
  Script script;
  for (int32_t id : ids) {
    script.messages.push_back(Tokens({id}));
    script.messages.back().mutable_usage()->set_cached_prompt_tokens(4);  // the worker's usage so far
  }
  script.messages.push_back(Final({}, v1::FINISH_REASON_LENGTH, 0));
  Expect("w0", script);
  std::vector<v1::GenerateTextResponse> out;
  ASSERT_TRUE(Run(Plan({"lo w"}), out).ok());
  std::string text;
  for (const auto& m : out) text += m.text();
  EXPECT_EQ(text, "hel");
  EXPECT_EQ(out.back().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_LT(AllTokens(out).size(), ids.size());
  EXPECT_EQ(out.back().usage().generated_tokens(), static_cast<int>(AllTokens(out).size()));
  EXPECT_EQ(out.back().usage().cached_prompt_tokens(), 4);  // known before the worker's final message
}

TEST_F(GenerationRunnerTest, TheClientsCancellationSeenByTheWorkerFirstIsNotAWorkerFailure) {
  // The worker call is the client call's child, so it may see the client's
  // cancel or deadline before the server context does.
  Expect("w0", {.messages = {Tokens({60})}, .status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")});
  ExpectNoCall("w1");
  std::vector<v1::GenerateTextResponse> out;
  EXPECT_EQ(Run(Plan(), out).error_code(), grpc::StatusCode::CANCELLED);
  Expect("w0", {.status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline")});
  EXPECT_NE(Run(Plan(), out).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(GenerationRunnerTest, OneAttemptAllowedMeansNoRetry) {
  GenerationRunner strict(*selector_, *pool_, metrics_, {.max_attempts = 1});
  Expect("w0", {.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone")});
  ExpectNoCall("w1");
  grpc::ServerContext context;
  const grpc::Status s = strict.Run(context, Plan(), GenerationRunner::Clock::now(), [](const auto&) { return true; });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(GenerationRunnerTest, WhenEveryWorkerIsFullTheClientHearsSoAtOnce) {
  Expect("w0", {.status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "waiting queue is full")});
  Expect("w1", {.status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "waiting queue is full")});
  std::vector<v1::GenerateTextResponse> out;
  const grpc::Status s = Run(Plan(), out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("waiting queue is full"), std::string::npos) << s.error_message();
  EXPECT_TRUE(out.empty());
}

TEST_F(GenerationRunnerTest, TheRequestsOwnErrorGoesBackWithoutARetry) {
  Expect("w0", {.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "top_p must be in (0, 1]")});
  ExpectNoCall("w1");
  std::vector<v1::GenerateTextResponse> out;
  const grpc::Status s = Run(Plan(), out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "top_p must be in (0, 1]");
}

TEST_F(GenerationRunnerTest, AClientThatIsGoneEndsTheCallWithoutARetry) {
  Expect("w0", {.messages = {Tokens({50}), Tokens({51}), Final({52}, v1::FINISH_REASON_LENGTH, 0)}});
  ExpectNoCall("w1");
  std::vector<v1::GenerateTextResponse> out;
  const grpc::Status s = Run(Plan(), out, /*accept=*/1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(out.size(), 1u);
}

TEST_F(GenerationRunnerTest, WorkersFailingInARowEndWithUnavailableNamingTheLastError) {
  Expect("w0", {.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "w0 down")});
  Expect("w1", {.status = grpc::Status(grpc::StatusCode::INTERNAL, "w1 engine failed")});
  std::vector<v1::GenerateTextResponse> out;
  const grpc::Status s = Run(Plan(), out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("w1 engine failed"), std::string::npos) << s.error_message();
}

// A split: w0 (prefill) computes the prompt and the first token and hands
// off under a lease; w1 (decode) continues from that token, told to pull
// the prompt's block from w0 under the same lease; the client sees one
// stream, no handoff, and the prefill worker's cached-token figure.
TEST_F(GenerationRunnerTest, ALongPromptIsPrefilledOnAPrefillWorkerAndDecodedElsewhere) {
  SetRoles({{"w0", "prefill"}, {"w1", "decode"}}, /*split_tokens=*/4);
  v1::GenerateRequest prefill, decode;
  Expect("w0", {.messages = {Final({20}, v1::FINISH_REASON_HANDOFF, 0)}}, &prefill);
  Expect("w1", {.messages = {Tokens({21}), Final({22}, v1::FINISH_REASON_LENGTH, 4)}}, &decode);
  std::vector<v1::GenerateTextResponse> out;
  const grpc::Status s = Run(Plan(), out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(AllTokens(out), (std::vector<int32_t>{20, 21, 22}));
  ASSERT_TRUE(prefill.has_prefill_handoff());
  EXPECT_FALSE(prefill.prefill_handoff().lease_id().empty());
  EXPECT_FALSE(decode.has_prefill_handoff());
  EXPECT_EQ(std::vector<int32_t>(decode.resumed_output_token_ids().begin(), decode.resumed_output_token_ids().end()),
            (std::vector<int32_t>{20}));
  EXPECT_EQ(decode.kv_peer().endpoint(), "w0:7002");
  EXPECT_EQ(decode.kv_peer().blocks(), 1) << "the prompt's one full block (6 tokens, blocks of 4)";
  EXPECT_EQ(decode.kv_peer().lease_id(), prefill.prefill_handoff().lease_id());
  for (const auto& m : out) EXPECT_NE(m.finish_reason(), v1::FINISH_REASON_HANDOFF);
  EXPECT_EQ(out.front().worker_id(), "w0");
  EXPECT_EQ(out.back().worker_id(), "w1");
  EXPECT_EQ(out.back().finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(out.back().usage().cached_prompt_tokens(), 0) << "the prefill worker's figure, not the pull's";
  EXPECT_EQ(out.back().usage().generated_tokens(), 3);
}

// The first token waits for the decode worker's stream, so the pull falls
// in the time to first token and not between the first two tokens; with
// stream_first_token_before_handoff it goes out as soon as it is computed.
// Per message: whether the decode worker had been called when it was sent.
std::vector<bool> GenerationRunnerTest::DecodeCalledAtEachMessage(bool stream_first_token_early) {
  SetRoles({{"w0", "prefill"}, {"w1", "decode"}}, /*split_tokens=*/4);
  runner_ = std::make_unique<GenerationRunner>(
      *selector_, *pool_, metrics_,
      GenerationRunnerOptions{.max_attempts = 3, .stream_first_token_before_handoff = stream_first_token_early});
  v1::GenerateRequest decode;
  Expect("w0", {.messages = {Final({20}, v1::FINISH_REASON_HANDOFF, 0)}});
  Expect("w1", {.messages = {Tokens({21}), Final({22}, v1::FINISH_REASON_LENGTH, 4)}}, &decode);
  std::vector<bool> called;
  std::vector<int32_t> tokens;
  grpc::ServerContext context;
  const grpc::Status s =
      runner_->Run(context, Plan(), GenerationRunner::Clock::now(), [&](const v1::GenerateTextResponse& r) {
        called.push_back(decode.has_kv_peer());
        tokens.insert(tokens.end(), r.token_ids().begin(), r.token_ids().end());
        return true;
      });
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(tokens, (std::vector<int32_t>{20, 21, 22}));
  return called;
}

TEST_F(GenerationRunnerTest, ASplitsFirstTokenWaitsForTheDecodeWorker) {
  const std::vector<bool> called = DecodeCalledAtEachMessage(false);
  ASSERT_FALSE(called.empty());
  EXPECT_TRUE(called.front());
}

TEST_F(GenerationRunnerTest, ASplitsFirstTokenMayGoOutBeforeTheHandoff) {
  const std::vector<bool> called = DecodeCalledAtEachMessage(true);
  ASSERT_FALSE(called.empty());
  EXPECT_FALSE(called.front());
}

TEST_F(GenerationRunnerTest, AShortPromptGoesWholeToADecodeWorker) {
  SetRoles({{"w0", "prefill"}, {"w1", "decode"}}, /*split_tokens=*/100);
  ExpectNoCall("w0");
  v1::GenerateRequest whole;
  Expect("w1", {.messages = {Final({21, 22}, v1::FINISH_REASON_LENGTH, 0)}}, &whole);
  std::vector<v1::GenerateTextResponse> out;
  ASSERT_TRUE(Run(Plan(), out).ok());
  EXPECT_FALSE(whole.has_prefill_handoff());
  EXPECT_FALSE(whole.has_kv_peer());
  EXPECT_EQ(AllTokens(out), (std::vector<int32_t>{21, 22}));
}

// A prefill worker that fails before its first token is retried as any
// worker would be: with no other prefill worker, the decode worker serves
// the request whole.
TEST_F(GenerationRunnerTest, APrefillWorkerThatFailsBeforeItsTokenLeavesTheRequestWhole) {
  SetRoles({{"w0", "prefill"}, {"w1", "decode"}}, /*split_tokens=*/4);
  Expect("w0", {.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused")});
  v1::GenerateRequest whole;
  Expect("w1", {.messages = {Final({20, 21}, v1::FINISH_REASON_LENGTH, 0)}}, &whole);
  std::vector<v1::GenerateTextResponse> out;
  const grpc::Status s = Run(Plan(), out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(whole.has_prefill_handoff());
  EXPECT_EQ(whole.resumed_output_token_ids_size(), 0);
  EXPECT_EQ(AllTokens(out), (std::vector<int32_t>{20, 21}));
}

TEST_F(GenerationRunnerTest, AHandoffNobodyAskedForIsAnError) {
  for (const char* id : {"w0", "w1"}) {
    EXPECT_CALL(*stubs_.at(id), GenerateRaw(_, _)).Times(::testing::AtMost(1)).WillRepeatedly([](auto*, const auto&) {
      return new FakeReader({.messages = {Final({20}, v1::FINISH_REASON_HANDOFF, 0)}});
    });
  }
  std::vector<v1::GenerateTextResponse> out;
  const grpc::Status s = Run(Plan(), out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(s.error_message().find("handed off a request it was not asked to"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace kvfleet::router
