// Peer prefix fetch over real gRPC on loopback: worker B's engine pulls a
// prompt's blocks from worker A's KvTransfer port (KvPeerClient against
// KvTransferService) and its tokens equal those of computing everything
// itself. Every fault falls back to computing, with the same tokens: a
// peer whose port is gone, a chunk corrupted in flight, a stream cut
// inside a block, and a peer of another KV format (refused, naming both).
// A pull names the adapter its blocks were computed under, and the peer's
// answer repeats it.
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "kvfleet/v1/kv_transfer.grpc.pb.h"
#include "services/transport/grpc/grpc_channel.h"
#include "services/transport/grpc/grpc_server.h"
#include "services/worker/transfer/kv_peer_client.h"
#include "services/worker/transfer/kv_transfer_convert.h"
#include "services/worker/transfer/kv_transfer_service.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::worker {
namespace {

using ::kvfleet::testing::CollectingSink;

constexpr int32_t kBlockSize = 4;
const engine::EngineOptions kEngine{.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 64, .max_num_seqs = 4}};

class KvTransferGrpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new kvfleet::testing::TempDir();
    ASSERT_TRUE(tools::WriteTinyModel(kvfleet::testing::TestModelShape({.dtype = DType::kQ8_0, .seed = 31}),
                                      dir_->Path("t.gguf"))
                    .ok());
    model_ = model::Model::Load(dir_->Path("t.gguf"))->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }

  static engine::EngineRequest Prompt(uint64_t id) {
    engine::EngineRequest r{.id = RequestId(id)};
    for (int i = 0; i < 43; ++i) r.prompt.push_back(static_cast<model::TokenId>((i * 11 + 5) % 280));
    r.stopping = {.max_tokens = 8, .ignore_eos = true};
    r.sampling = {.temperature = 0.9f, .top_k = 40, .seed = 3};
    return r;
  }

  // Worker A: an engine on its own thread that has computed Prompt, and its
  // transfer port.
  struct PeerA {
    std::unique_ptr<engine::ModelExecutor> executor;
    std::unique_ptr<engine::Engine> engine;
    std::unique_ptr<KvTransferService> service;
    transport::RunningServer server;
    ~PeerA() {
      if (server.server) server.Shutdown(std::chrono::system_clock::now());
      if (engine) engine->Stop();
    }
  };
  static std::unique_ptr<PeerA> StartPeer(const std::string& fault = "") {
    auto a = std::make_unique<PeerA>();
    a->executor = kvfleet::testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
    a->engine = std::make_unique<engine::Engine>(*a->executor, kEngine);
    a->engine->Start();
    CollectingSink sink;
    EXPECT_TRUE(a->engine->Submit(Prompt(900), &sink).ok());
    sink.WaitFinished();
    a->service =
        std::make_unique<KvTransferService>(*a->engine, KvTransferIdentityOf(a->executor->info(), "tiny", "f16"),
                                            KvTransferServiceOptions{.max_chunk_bytes = 4096, .fault = fault});
    auto server = transport::StartGrpcServer({.services = {a->service.get()}, .reflection = false});
    EXPECT_TRUE(server.ok()) << server.status();
    a->server = std::move(*server);
    return a;
  }

  struct Result {
    std::vector<model::TokenId> tokens;
    int32_t cached = 0;
    engine::KvPeerStats stats;
  };
  // Prompt on a fresh worker B, told that `peer` holds its 10 blocks.
  static Result RunB(const std::string& peer, const std::string& kv_dtype = "f16",
                     const std::function<void(KvPeerClientOptions&)>& tune = nullptr) {
    auto executor = kvfleet::testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
    KvPeerClientOptions client_options{.identity = KvTransferIdentityOf(executor->info(), "tiny", kv_dtype),
                                       .deadline = std::chrono::milliseconds(5000)};
    if (tune) tune(client_options);
    KvPeerClient client(client_options);
    engine::EngineOptions options = kEngine;
    options.kv_peer_fetcher = &client;
    Result out;
    engine::Engine b(*executor, options);
    b.Start();
    engine::EngineRequest r = Prompt(1);
    if (!peer.empty()) r.kv_peer = engine::KvPeerSource{.endpoint = peer, .blocks = 10};
    CollectingSink sink;
    EXPECT_TRUE(b.Submit(r, &sink).ok());
    sink.WaitFinished();
    b.Stop();
    out.tokens = sink.tokens();
    out.cached = sink.usage().cached_prompt_tokens;
    out.stats = b.Stats().kv_peer;
    return out;
  }

  static inline kvfleet::testing::TempDir* dir_ = nullptr;
  static inline model::Model* model_ = nullptr;
};

TEST_F(KvTransferGrpcTest, APrefixPulledOverGrpcGivesTheTokensOfComputingItHere) {
  const Result alone = RunB("");
  std::unique_ptr<PeerA> a = StartPeer();
  const Result pulled = RunB(a->server.address);
  EXPECT_EQ(pulled.tokens, alone.tokens);
  EXPECT_EQ(pulled.cached, 40);
  EXPECT_EQ(pulled.stats.pulls_done, 1);
  EXPECT_EQ(pulled.stats.blocks_pulled, 10);
  EXPECT_EQ(a->engine->Stats().kv_peer.blocks_served, 10);
}

TEST_F(KvTransferGrpcTest, EveryFaultComputesThePrefixWithTheSameTokens) {
  const Result alone = RunB("");
  const auto expect_fallback = [&](const Result& r, const std::string& what) {
    EXPECT_EQ(r.tokens, alone.tokens) << what;
    EXPECT_EQ(r.cached, 0) << what;
    EXPECT_EQ(r.stats.pulls_failed, 1) << what;
    EXPECT_EQ(r.stats.blocks_pulled, 0) << what;
  };
  {
    std::unique_ptr<PeerA> a = StartPeer();
    const std::string gone = a->server.address;
    a.reset();  // the peer's port closes
    expect_fallback(RunB(gone), "peer gone");
  }
  expect_fallback(RunB(StartPeer("corrupt-chunk")->server.address), "a chunk corrupted in flight");
  expect_fallback(RunB(StartPeer("truncate-block")->server.address), "a stream cut inside a block");
  expect_fallback(RunB(StartPeer()->server.address, /*kv_dtype=*/"int8"), "another KV format");
  expect_fallback(RunB(StartPeer("stall")->server.address, "f16",
                       [](KvPeerClientOptions& o) { o.deadline = std::chrono::milliseconds(300); }),
                  "a peer that hangs past the deadline");
}

// The bytes a worker's pulls hold in flight are bounded, in all and per
// peer: a pull past a bound brings the leading blocks that fit, and one
// where none fits is refused; either way the rest is computed.
TEST_F(KvTransferGrpcTest, PullsStayWithinTheirBytesInFlight) {
  const Result alone = RunB("");
  std::unique_ptr<PeerA> a = StartPeer();
  const int64_t block = a->executor->info().kv_block_bytes;
  const Result four =
      RunB(a->server.address, "f16", [&](KvPeerClientOptions& o) { o.max_bytes_in_flight = 4 * block + 1; });
  EXPECT_EQ(four.tokens, alone.tokens);
  EXPECT_EQ(four.cached, 4 * kBlockSize);
  EXPECT_EQ(four.stats.pulls_partial, 1);
  const Result none =
      RunB(a->server.address, "f16", [&](KvPeerClientOptions& o) { o.max_peer_bytes_in_flight = block - 1; });
  EXPECT_EQ(none.tokens, alone.tokens);
  EXPECT_EQ(none.cached, 0);
  EXPECT_EQ(none.stats.failed_by_reason.at("resource_exhausted"), 1);
}

// A split request queued at its decode worker keeps its prefill worker's
// lease: the renewal crosses gRPC and moves the lease's deadline; one for
// a lease that ended takes nothing.
TEST_F(KvTransferGrpcTest, ALeaseRenewalReachesThePrefillWorker) {
  std::unique_ptr<PeerA> a = StartPeer();
  engine::EngineRequest prefill = Prompt(901);
  prefill.prefill_only = true;
  prefill.kv_lease_id = "lease-r";
  CollectingSink handed;
  ASSERT_TRUE(a->engine->Submit(prefill, &handed).ok());
  handed.WaitFinished();
  ASSERT_EQ(handed.reason(), engine::FinishReason::kHandoff);
  ASSERT_EQ(a->engine->Stats().kv_leases, 1);
  KvPeerClient client({.identity = KvTransferIdentityOf(a->executor->info(), "tiny", "f16")});
  client.RenewLease(a->server.address, "no-such-lease");
  client.RenewLease(a->server.address, "lease-r");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (a->engine->Stats().kv_lease_counters.renewed < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(a->engine->Stats().kv_lease_counters.renewed, 1);
  EXPECT_EQ(a->engine->Stats().kv_leases, 1);
}

// The handshake names the adapter a pull's blocks were computed under: the
// peer repeats it, refuses one that is not name@digest, and a peer that
// answers without it is refused by the puller, naming the adapter.
TEST_F(KvTransferGrpcTest, ThePullNamesItsAdapterAndThePeerRepeatsIt) {
  std::unique_ptr<PeerA> a = StartPeer();
  const std::string adapter = "sql@" + std::string(64, 'c');
  const auto pull = [&](const std::string& named, v1::PullBlocksResponse* first) {
    auto stub = v1::KvTransfer::NewStub(transport::CreateClientChannel(a->server.address));
    engine::KvTransferIdentity identity = KvTransferIdentityOf(a->executor->info(), "tiny", "f16");
    identity.adapter = named;
    v1::PullBlocksRequest request;
    ToProto(identity, request.mutable_identity());
    request.add_block_hashes(std::string(16, '\x01'));
    grpc::ClientContext context;
    auto reader = stub->PullBlocks(&context, request);
    while (reader->Read(first)) {
    }
    return reader->Finish();
  };
  v1::PullBlocksResponse answer;
  ASSERT_TRUE(pull(adapter, &answer).ok());
  EXPECT_EQ(answer.identity().adapter(), adapter);
  ASSERT_TRUE(pull("", &answer).ok());
  EXPECT_EQ(answer.identity().adapter(), "");
  for (const std::string& bad : std::vector<std::string>{"sql", "sql@" + std::string(63, 'c'),
                                                         "@" + std::string(64, 'c'), "sql@" + std::string(64, 'C')}) {
    const grpc::Status refused = pull(bad, &answer);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(refused.error_message().find("not name@digest"), std::string::npos) << refused.error_message();
  }

  std::unique_ptr<PeerA> forgetful = StartPeer("forget-adapter");
  KvPeerClient client({.identity = KvTransferIdentityOf(a->executor->info(), "tiny", "f16")});
  std::promise<absl::Status> done;
  client.Fetch(forgetful->server.address, adapter, {BlockHash::FromBytes(std::string(16, '\x01')).value()}, "",
               [&](std::vector<engine::KvBlockBytes>, absl::Status status) { done.set_value(status); });
  const absl::Status status = done.get_future().get();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("adapter: here \"" + adapter + "\", peer \"\""), std::string::npos) << status;
}

}  // namespace
}  // namespace kvfleet::worker
