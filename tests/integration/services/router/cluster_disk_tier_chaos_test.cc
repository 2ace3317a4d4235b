// The disk tier's chaos cases, through real router, cachemanager and
// worker processes on loopback (docs/operations.md, "Faults the cluster
// survives"; the other cases are in cluster_failover_test.cc). Each prints
// a line "chaos <letter>: ..." with its counts:
//   i. a worker SIGKILLed while it offloads KV blocks to its disk tier, then
//      restarted on the same directory: no stream fails or changes, and the
//      restarted worker announces the blocks it finds and serves hits from
//      them with the same tokens (again with a sliding-window model, whose
//      window pages go to disk and come back but are never announced);
//   j. a disk tier corrupted under load: 0 wrong tokens, 0 failed requests,
//      the damage counted.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/integration/services/router/router_cluster.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

// Cases i and j: conversations of 7 full blocks (and a few more tokens)
// on workers whose device cache holds about 24 blocks of the tiny model
// (32 KiB a block), so most of what they compute is evicted to the disk tier
// within a few requests.
constexpr int kConversations = 16;
const std::vector<std::string> kSmallDevice = {"--kv-cache-memory", "768KiB", "--threads", "1"};

v1::GenerateTextRequest Conversation(int c) { return TinyTextRequest(7000 + c, 120, 8); }

// Every conversation once, one at a time: the reference answers (greedy).
std::vector<std::vector<int32_t>> ReferenceAnswers(const RouterCluster& cluster) {
  std::vector<std::vector<int32_t>> out;
  for (int c = 0; c < kConversations; ++c) {
    const TextStreamResult r = cluster.Generate(Conversation(c));
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    out.push_back(r.tokens);
  }
  return out;
}

// Flips a byte near the end (in the payload) of every block file under `dir`.
int CorruptDiskTier(const std::string& dir) {
  int damaged = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.path().extension() != ".kvblock") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-7, std::ios::end);
    const int c = f.get();
    if (!f) continue;  // evicted (deleted) meanwhile
    f.seekp(-7, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
    damaged += f ? 1 : 0;
  }
  return damaged;
}

// What the restarted worker of case i has on disk (every page, window
// pages included) and what the cachemanager indexed of it.
struct RestartedDisk {
  double on_disk = 0;
  double announced = 0;
};

// Case i on `model_path` (empty: the harness's model); `label` names the
// run in its printed line.
RestartedDisk KillWhileOffloadingThenServeFromDisk(const std::string& model_path, const char* label) {
  RouterCluster cluster;
  const absl::Status started =
      cluster.Start({.workers = 2, .model_path = model_path, .worker_args = kSmallDevice, .kv_disk_size = "64MiB"});
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return {};
  const std::vector<std::vector<int32_t>> reference = ReferenceAnswers(cluster);
  // Every conversation twice over, 8 at a time; worker-0 is killed once the
  // load is under way (its evictions are being written to disk).
  std::vector<v1::GenerateTextRequest> load;
  for (int round = 0; round < 2; ++round) {
    for (int c = 0; c < kConversations; ++c) load.push_back(Conversation(c));
  }
  std::atomic<int> messages{0};
  std::thread killer([&] {
    WaitUntil([&] { return messages.load() >= 20; }, milliseconds(30000));
    cluster.KillWorker(0);
  });
  std::vector<TextStreamResult> results;
  for (size_t at = 0; at < load.size(); at += 8) {
    std::vector<v1::GenerateTextRequest> wave(load.begin() + at, load.begin() + std::min(load.size(), at + 8));
    for (TextStreamResult& r : RunConcurrently(cluster, wave, [&](size_t, const TextStreamResult&) { ++messages; })) {
      results.push_back(std::move(r));
    }
  }
  killer.join();
  int failed = 0, wrong = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    failed += !results[i].status.ok();
    wrong += results[i].status.ok() && results[i].tokens != reference[i % kConversations];
  }
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
  // Restarted on the same directory: it adopts the files and, after its
  // first snapshot, announces them as disk blocks.
  EXPECT_TRUE(cluster.StartWorker(0).ok());
  EXPECT_TRUE(cluster.WaitForLiveWorkers(2, milliseconds(20000)));
  const auto indexed_on_disk = [&] {
    absl::StatusOr<PrometheusScrape> s = cluster.ScrapeCacheManager();
    return s.ok() ? s->Value("kvfleet_cachemanager_indexed_tier_blocks", {{"worker_id", "worker-0"}, {"tier", "disk"}})
                        .value_or(0)
                  : 0;
  };
  RestartedDisk disk;
  EXPECT_TRUE(WaitUntil([&] { return (disk.announced = indexed_on_disk()) > 0; }, milliseconds(20000)))
      << "the restarted worker's disk blocks never reached the index";
  // The announcements come in batches: read the index once it stops moving.
  for (double before = -1; before != disk.announced;) {
    before = disk.announced;
    std::this_thread::sleep_for(milliseconds(500));
    disk.announced = indexed_on_disk();
  }
  if (absl::StatusOr<PrometheusScrape> m = cluster.worker(0).ScrapeMetrics(); m.ok()) {
    disk.on_disk = m->Value("kvfleet_worker_kv_tier_blocks", {{"tier", "disk"}}).value_or(0);
  }
  // Asked directly, the restarted worker answers from its disk tier.
  int same = 0;
  for (int c = 0; c < kConversations; ++c) {
    const v1::GenerateRequest request = TinyRequest(7000 + c, 120, 8);  // Conversation(c) as the worker takes it
    const StreamResult r = cluster.worker(0).Generate(request);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    same += r.tokens == reference[static_cast<size_t>(c)];
  }
  absl::StatusOr<PrometheusScrape> metrics = cluster.worker(0).ScrapeMetrics();
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  const double hits =
      metrics.ok() ? metrics->Value("kvfleet_worker_kv_tier_hit_blocks_total", {{"tier", "disk"}}).value_or(0) : 0;
  std::printf(
      "chaos i (%s): %zu streams across a SIGKILL during offload: %d failed, %d changed; restarted, it announced "
      "%.0f disk blocks of the %.0f it holds and answered %d of %d conversations identically, %.0f blocks from "
      "disk\n",
      label, results.size(), failed, wrong, disk.announced, disk.on_disk, same, kConversations, hits);
  EXPECT_EQ(same, kConversations);
  EXPECT_GT(hits, 0);
  return disk;
}

TEST(RouterFailoverTest, ChaosI_AWorkerKilledWhileOffloadingRestartsOnItsDiskTierAndServesFromIt) {
  const RestartedDisk disk = KillWhileOffloadingThenServeFromDisk("", "harness model");
  EXPECT_EQ(disk.announced, disk.on_disk) << "every block on disk is announced";
}

// The same with a sliding-window model whose windowed layers free their
// passed blocks: their pages go to disk too, come back in the same loads,
// and are never announced. Gemma 3's layout (five layers of six on a
// window of 32 tokens, two 16-token blocks): a page is one layer of a
// block, and the cachemanager hears of block hashes only: fewer than the
// disk holds, and at most 8 for each of the 16 conversations (128 tokens
// each).
TEST(RouterFailoverTest, ChaosI_ASlidingWindowWorkerRestartsOnItsDiskTierWithItsWindowPages) {
  TempDir dir;
  const std::string model = dir.Path("tiny-gemma3.gguf");
  tools::TinyModelOptions gemma = HarnessModelOptions();
  gemma.architecture = "gemma3";
  gemma.num_layers = 6;
  gemma.sliding_window = 32;
  ASSERT_TRUE(tools::WriteTinyModel(gemma, model).ok());
  const RestartedDisk disk = KillWhileOffloadingThenServeFromDisk(model, "sliding window");
  EXPECT_LE(disk.announced, kConversations * 8) << "window pages were announced as blocks";
  EXPECT_LT(disk.announced, disk.on_disk) << "the disk holds window pages, which are never announced";
}

TEST(RouterFailoverTest, ChaosJ_ADiskTierCorruptedUnderLoadGivesNoWrongTokenAndFailsNothing) {
  RouterCluster cluster;
  ASSERT_TRUE(cluster.Start({.workers = 1, .worker_args = kSmallDevice, .kv_disk_size = "64MiB"}).ok());
  const std::vector<std::vector<int32_t>> reference = ReferenceAnswers(cluster);
  std::atomic<bool> done{false};
  int damaged = CorruptDiskTier(cluster.KvDiskDir(0));
  std::thread vandal([&] {
    while (!done.load()) {
      damaged += CorruptDiskTier(cluster.KvDiskDir(0));
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  std::vector<v1::GenerateTextRequest> load;
  for (int round = 0; round < 3; ++round) {
    for (int c = 0; c < kConversations; ++c) load.push_back(Conversation(c));
  }
  std::vector<TextStreamResult> results;
  for (size_t at = 0; at < load.size(); at += 4) {
    std::vector<v1::GenerateTextRequest> wave(load.begin() + at, load.begin() + std::min(load.size(), at + 4));
    for (TextStreamResult& r : RunConcurrently(cluster, wave, nullptr)) results.push_back(std::move(r));
  }
  done = true;
  vandal.join();
  int failed = 0, wrong = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    failed += !results[i].status.ok();
    wrong += results[i].status.ok() && results[i].tokens != reference[i % kConversations];
  }
  absl::StatusOr<PrometheusScrape> metrics = cluster.worker(0).ScrapeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const double errors = metrics->Value("kvfleet_worker_kv_disk_errors_total").value_or(0);
  std::printf(
      "chaos j: %zu requests while disk block files were damaged (%d flips): %d failed, %d with a wrong token; "
      "%.0f damaged reads counted (each a miss)\n",
      results.size(), damaged, failed, wrong, errors);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(damaged, 0);
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace kvfleet::testing
