// The cachemanager with real workers on loopback: the index follows what the
// workers cache (with the hashes a router computes itself), dead and
// restarted workers leave nothing behind, a restarted cachemanager
// re-converges on its own, and malformed event streams are refused.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "common/block_hash.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "tests/integration/services/worker/worker_harness.h"
#include "tests/testing/http_get.h"
#include "tests/testing/service_process.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kBlock = 16;

class CacheManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(StartCacheManager("127.0.0.1:0").ok()); }

  absl::Status StartCacheManager(const std::string& listen) {
    absl::StatusOr<StartedService> cm = StartServiceProcess(
        "kvfleet-cachemanager", KVFLEET_CACHEMANAGER_BINARY,
        {"--listen", listen, "--metrics-port", "0", "--liveness-deadline", "1", "--heartbeat-interval", "200"},
        dir_.Path("cachemanager.log"), absl::Seconds(30));
    if (!cm.ok()) return cm.status();
    cm_ = std::move(*cm);
    stub_ = v1::CacheManager::NewStub(NewTestChannel(cm_.address));
    return absl::OkStatus();
  }

  std::unique_ptr<WorkerHarness> StartWorker(const std::string& id) {
    auto w = std::make_unique<WorkerHarness>();
    const absl::Status s = w->Start({"--cachemanager", cm_.address, "--worker-id", id});
    EXPECT_TRUE(s.ok()) << s;
    // Every worker here holds the same tiny model: one fingerprint.
    absl::StatusOr<v1::WorkerInfo> info = w->Info();
    EXPECT_TRUE(info.ok()) << info.status();
    if (info.ok()) {
      EXPECT_EQ(info->model_fingerprint().size(), 64u);
      if (fingerprint_.empty()) fingerprint_ = info->model_fingerprint();
      EXPECT_EQ(info->model_fingerprint(), fingerprint_);
    }
    return w;
  }

  // The hashes a router computes for a prompt: common/ and the fingerprint
  // GetInfo reported, nothing else from the worker.
  std::vector<std::string> RouterHashes(const v1::GenerateRequest& r, const std::string& salt = "") const {
    const std::vector<int32_t> tokens(r.prompt_token_ids().begin(), r.prompt_token_ids().end());
    std::vector<std::string> out;
    for (const BlockHash& h : HashFullBlocks(RootBlockHash("tiny", fingerprint_, salt), tokens, kBlock)) {
      out.push_back(h.ToBytes());
    }
    return out;
  }

  // worker id → matched blocks, for every live worker of the model.
  std::map<std::string, int> Overlaps(const std::vector<std::string>& hashes) {
    v1::FindOverlapsRequest request;
    request.set_model_id("tiny");
    for (const std::string& h : hashes) request.add_block_hashes(h);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::FindOverlapsResponse response;
    std::map<std::string, int> out;
    if (!stub_->FindOverlaps(&context, request, &response).ok()) return out;
    for (const auto& w : response.workers()) out[w.worker_id()] = w.matched_blocks();
    return out;
  }

  std::vector<v1::WorkerEntry> Workers() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListWorkersResponse response;
    if (!stub_->ListWorkers(&context, v1::ListWorkersRequest(), &response).ok()) return {};
    return {response.workers().begin(), response.workers().end()};
  }

  bool Listed(const std::string& id) {
    for (const auto& w : Workers()) {
      if (w.worker_id() == id) return true;
    }
    return false;
  }

  TempDir dir_;
  StartedService cm_;
  std::unique_ptr<v1::CacheManager::Stub> stub_;
  std::string fingerprint_;  // the workers' model's
};

TEST_F(CacheManagerTest, EachPrefixIsFoundOnTheWorkerThatServedItWithRouterComputedHashes) {
  auto w1 = StartWorker("w1");
  auto w2 = StartWorker("w2");
  const v1::GenerateRequest a = TinyRequest(1, 4 * kBlock + 5, 4);
  v1::GenerateRequest b = TinyRequest(2, 3 * kBlock, 2);
  b.set_cache_salt("tenant-b");
  ASSERT_TRUE(w1->Generate(a).status.ok());
  ASSERT_TRUE(w2->Generate(b).status.ok());
  const auto ha = RouterHashes(a), hb = RouterHashes(b, "tenant-b");
  ASSERT_EQ(ha.size(), 4u);
  std::map<std::string, int> oa, ob;
  EXPECT_TRUE(WaitUntil(
      [&] {
        oa = Overlaps(ha);
        ob = Overlaps(hb);
        return oa["w1"] == 4 && ob["w2"] == 3;
      },
      milliseconds(10000)))
      << "w1 holds " << oa["w1"] << " of prefix a, w2 holds " << ob["w2"] << " of prefix b";
  EXPECT_EQ(oa.size(), 2u) << "both live workers are listed";
  EXPECT_EQ(oa["w2"], 0);
  EXPECT_EQ(ob["w1"], 0);
  EXPECT_EQ(Overlaps(RouterHashes(b, ""))["w2"], 0) << "another salt is another prefix";
  for (const auto& w : Workers()) {
    EXPECT_EQ(w.indexed_blocks(), w.worker_id() == "w1" ? w1->Stats()->blocks_cached() + w1->Stats()->blocks_used()
                                                        : w2->Stats()->blocks_cached() + w2->Stats()->blocks_used())
        << "the index agrees with the worker's own count for " << w.worker_id();
  }
}

TEST_F(CacheManagerTest, AKilledWorkerDisappearsWithinTheLivenessDeadline) {
  auto w1 = StartWorker("w1");
  auto w2 = StartWorker("w2");
  ASSERT_TRUE(WaitUntil([&] { return Listed("w1") && Listed("w2"); }, milliseconds(10000)));
  grpc::ClientContext watch_context;
  auto watch = stub_->WatchWorkers(&watch_context, v1::WatchWorkersRequest());
  const auto killed = std::chrono::steady_clock::now();
  w1->worker().process().Signal(SIGKILL);
  ASSERT_TRUE(WaitUntil([&] { return !Listed("w1"); }, milliseconds(5000)));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_LT(seconds, 1.0 + 0.5) << "liveness deadline 1 s, sweep every 100 ms";
  std::printf("killed worker removed after %.2f s (liveness deadline 1 s)\n", seconds);
  EXPECT_TRUE(Listed("w2"));
  std::vector<std::pair<v1::WorkerChange::Kind, std::string>> changes;
  v1::WorkerChange change;
  while (watch->Read(&change)) {
    changes.emplace_back(change.kind(), change.worker().worker_id());
    if (change.kind() == v1::WorkerChange::LEFT) break;
  }
  watch_context.TryCancel();
  ASSERT_GE(changes.size(), 3u);
  EXPECT_EQ(changes.back(), std::make_pair(v1::WorkerChange::LEFT, std::string("w1")));
}

TEST_F(CacheManagerTest, ARestartedWorkerStartsEmpty) {
  auto w1 = StartWorker("w1");
  const v1::GenerateRequest a = TinyRequest(3, 4 * kBlock, 2);
  ASSERT_TRUE(w1->Generate(a).status.ok());
  ASSERT_TRUE(WaitUntil([&] { return Overlaps(RouterHashes(a))["w1"] == 4; }, milliseconds(10000)));
  uint64_t old_incarnation = 0;
  for (const auto& w : Workers()) old_incarnation = w.incarnation();
  w1->worker().process().Signal(SIGKILL);
  // Same id at a new port, well before the liveness deadline: it is let in
  // once the killed incarnation's deadline has passed.
  auto again = StartWorker("w1");
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto workers = Workers();
        return workers.size() == 1 && workers[0].incarnation() != old_incarnation;
      },
      milliseconds(10000)));
  EXPECT_EQ(Overlaps(RouterHashes(a))["w1"], 0) << "the new incarnation must not inherit the old one's blocks";
}

// Two live workers given one id: the second is refused with both addresses
// named (in its log), the first keeps the id with no flapping for several
// liveness deadlines, and the second gets in once the first is gone.
TEST_F(CacheManagerTest, ASecondLiveWorkerWithTheSameIdIsRefused) {
  auto first = StartWorker("w1");
  ASSERT_TRUE(WaitUntil([&] { return Listed("w1"); }, milliseconds(10000)));
  const v1::WorkerEntry holder = Workers().at(0);
  grpc::ClientContext watch_context;
  auto watch = stub_->WatchWorkers(&watch_context, v1::WatchWorkersRequest());
  auto second = StartWorker("w1");
  const auto read_log = [&] {
    std::stringstream s;
    s << std::ifstream(second->LogPath()).rdbuf();
    return s.str();
  };
  ASSERT_TRUE(WaitUntil([&] { return read_log().find("refused") != std::string::npos; }, milliseconds(10000)))
      << read_log();
  const std::string log = read_log();
  EXPECT_NE(log.find(holder.endpoint()), std::string::npos) << log;
  EXPECT_NE(log.find(second->worker().address()), std::string::npos) << log;
  // Three liveness deadlines: the holder never changes.
  for (int i = 0; i < 30; ++i) {
    const std::vector<v1::WorkerEntry> workers = Workers();
    ASSERT_EQ(workers.size(), 1u);
    ASSERT_EQ(workers[0].incarnation(), holder.incarnation());
    std::this_thread::sleep_for(milliseconds(100));
  }
  first->worker().process().Signal(SIGKILL);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::vector<v1::WorkerEntry> workers = Workers();
        return workers.size() == 1 && workers[0].endpoint() == second->worker().address();
      },
      milliseconds(10000)));
  // Membership: the holder listed (JOINED) and gone (LEFT) once, then the second JOINED.
  std::vector<std::pair<v1::WorkerChange::Kind, std::string>> changes;
  v1::WorkerChange change;
  while (watch->Read(&change)) {
    changes.emplace_back(change.kind(), change.worker().endpoint());
    if (change.kind() == v1::WorkerChange::JOINED && change.worker().endpoint() == second->worker().address()) break;
  }
  watch_context.TryCancel();
  const std::vector<std::pair<v1::WorkerChange::Kind, std::string>> want = {
      {v1::WorkerChange::JOINED, holder.endpoint()},
      {v1::WorkerChange::LEFT, holder.endpoint()},
      {v1::WorkerChange::JOINED, second->worker().address()}};
  EXPECT_EQ(changes, want);
}

TEST_F(CacheManagerTest, ARestartedCacheManagerReconvergesWhileWorkersKeepServing) {
  auto w1 = StartWorker("w1");
  auto w2 = StartWorker("w2");
  const v1::GenerateRequest a = TinyRequest(4, 4 * kBlock, 2), b = TinyRequest(5, 2 * kBlock, 2);
  ASSERT_TRUE(w1->Generate(a).status.ok());
  ASSERT_TRUE(w2->Generate(b).status.ok());
  ASSERT_TRUE(WaitUntil([&] { return Overlaps(RouterHashes(a))["w1"] == 4; }, milliseconds(10000)));
  const std::string address = cm_.address;
  cm_.process->Signal(SIGKILL);
  ASSERT_TRUE(cm_.process->Wait(absl::Seconds(10)).ok());
  EXPECT_TRUE(w1->Generate(TinyRequest(6, 20, 3)).status.ok()) << "workers serve without the cachemanager";
  EXPECT_TRUE(w2->Generate(TinyRequest(7, 20, 3)).status.ok());

  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_TRUE(StartCacheManager(address).ok());
  std::map<std::string, int> oa, ob;
  EXPECT_TRUE(WaitUntil(
      [&] {
        oa = Overlaps(RouterHashes(a));
        ob = Overlaps(RouterHashes(b));
        return oa["w1"] == 4 && ob["w2"] == 2;
      },
      milliseconds(10000)))
      << "after the restart: w1 " << oa["w1"] << ", w2 " << ob["w2"];
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count();
  EXPECT_LT(seconds, 5.0) << "re-converged in " << seconds << " s";
  std::printf("index re-converged %.2f s after the cachemanager restarted\n", seconds);
  // The snapshots named every block's parent: the rebuilt index knows the
  // workers' chains whole, so their prompts are bisected, not walked.
  auto metrics_body = HttpGet("127.0.0.1", cm_.metrics_port, "/metrics", absl::Seconds(5));
  ASSERT_TRUE(metrics_body.ok()) << metrics_body.status();
  auto metrics = PrometheusScrape::Parse(*metrics_body);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GE(metrics->Value("kvfleet_cachemanager_snapshots_total").value_or(0), 2);
  EXPECT_EQ(metrics->Value("kvfleet_cachemanager_broken_chain_workers"), 0);
}

TEST_F(CacheManagerTest, TheCliListsTheLiveWorkers) {
  auto w1 = StartWorker("w1");
  ASSERT_TRUE(WaitUntil([&] { return Listed("w1"); }, milliseconds(10000)));
  auto cli = ChildProcess::Start(KVFLEET_CLI_BINARY, {"workers", "--cachemanager", cm_.address});
  ASSERT_TRUE(cli.ok()) << cli.status();
  const absl::StatusOr<int> code = (*cli)->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok() && *code == 0);
  const std::vector<std::string> lines = (*cli)->StdoutLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].rfind("w1 ", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find(w1->worker().address()), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2], "1 live worker");
}

// Sends `batches` on one PublishEvents stream and returns how it ended.
grpc::Status Publish(v1::CacheManager::Stub& stub, const std::vector<v1::EventBatch>& batches) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub.PublishEvents(&context);
  for (const v1::EventBatch& b : batches) {
    if (!stream->Write(b)) break;
  }
  stream->WritesDone();
  v1::PublisherCommand command;
  while (stream->Read(&command)) {
  }
  return stream->Finish();
}

v1::EventBatch Batch(uint64_t seq, std::vector<std::string> snapshot_hashes) {
  v1::EventBatch b;
  b.set_worker_id("raw");
  b.set_incarnation(9);
  b.set_sequence(seq);
  v1::Snapshot* s = b.add_events()->mutable_snapshot();
  for (const std::string& h : snapshot_hashes) s->add_hashes(h);
  return b;
}

TEST_F(CacheManagerTest, MalformedEventStreamsAreRefusedAndTheIndexStaysConsistent) {
  v1::RegisterRequest reg;
  reg.set_worker_id("raw");
  reg.set_incarnation(9);
  reg.set_endpoint("127.0.0.1:1");
  reg.set_model_id("tiny");
  reg.set_block_size(kBlock);
  reg.set_capacity_blocks(10);
  const auto register_raw = [&] {
    grpc::ClientContext c;
    v1::RegisterResponse r;
    return stub_->Register(&c, reg, &r);
  };
  ASSERT_TRUE(register_raw().ok());
  const v1::GenerateRequest a = TinyRequest(8, 3 * kBlock, 1);
  const auto hashes = RouterHashes(a);

  v1::EventBatch unknown = Batch(1, hashes);
  unknown.set_worker_id("nobody");
  grpc::Status s = Publish(*stub_, {unknown});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_NE(s.error_message().find("Register"), std::string::npos) << s.error_message();

  std::vector<std::string> short_hash = hashes;
  short_hash[1].pop_back();
  s = Publish(*stub_, {Batch(1, short_hash)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("snapshot.hashes[1] is 15 bytes"), std::string::npos) << s.error_message();
  EXPECT_EQ(Overlaps(hashes)["raw"], 0) << "nothing of the refused batch applied";

  ASSERT_TRUE(register_raw().ok());  // a new stream starts at sequence 1
  v1::EventBatch removal = Batch(3, {});
  removal.clear_events();
  removal.add_events()->mutable_removed()->add_hashes(hashes[0]);
  s = Publish(*stub_, {Batch(1, hashes), Batch(2, {}), removal, Batch(2, {})});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("sequence 2 does not follow 3"), std::string::npos) << s.error_message();
  // Snapshot of 3 then an empty snapshot then removing the first: the index
  // shows the accepted batches' result, and the refused one changed nothing.
  EXPECT_EQ(Overlaps(hashes)["raw"], 0);
  for (const auto& w : Workers()) {
    if (w.worker_id() == "raw") {
      EXPECT_EQ(w.indexed_blocks(), 0);
    }
  }
  ASSERT_TRUE(register_raw().ok());
  EXPECT_EQ(Publish(*stub_, {Batch(1, hashes)}).error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(Overlaps(hashes)["raw"], 3);

  auto metrics_body = HttpGet("127.0.0.1", cm_.metrics_port, "/metrics", absl::Seconds(5));
  ASSERT_TRUE(metrics_body.ok());
  auto metrics = PrometheusScrape::Parse(*metrics_body);
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->Value("kvfleet_cachemanager_rejected_batches_total", {{"code", "not_found"}}), 1);
  EXPECT_EQ(metrics->Value("kvfleet_cachemanager_rejected_batches_total", {{"code", "invalid_argument"}}), 1);
  EXPECT_EQ(metrics->Value("kvfleet_cachemanager_rejected_batches_total", {{"code", "failed_precondition"}}), 1);
  EXPECT_EQ(metrics->Value("kvfleet_cachemanager_indexed_blocks", {{"worker_id", "raw"}}), 3);
  EXPECT_EQ(metrics->Value("kvfleet_cachemanager_live_workers"), 1);
  EXPECT_GE(metrics->Value("kvfleet_cachemanager_snapshots_total").value_or(0), 3);
}

}  // namespace
}  // namespace kvfleet::testing
