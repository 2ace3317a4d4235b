// The engine with host-memory and disk tiers below its device cache: blocks
// the device evicts come back from a lower tier, bit-identical, so tokens
// with tiers equal tokens without (greedy and seeded, preempted too); a
// restarted engine serves hits from the disk tier a previous one left; a
// damaged, foreign or other tenant's file is never a hit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "engine/engine.h"
#include "engine/executor_kv_tiers.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/recording_kv_listener.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tests/unit/engine/engine_peer_fetcher.h"
#include "tests/unit/engine/tiny_model_suite.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::CollectingSink;

constexpr int32_t kBlockSize = 4;
constexpr int kConversations = 6;
constexpr int kPrefixTokens = 40;  // ten full blocks

class KvTiersEngineTest : public TinyModelSuite {
 protected:
  static void SetUpTestSuite() { LoadTinyModel({.dtype = DType::kQ8_0, .seed = 23}); }

  struct Result {
    std::map<uint64_t, std::vector<model::TokenId>> tokens;
    std::map<uint64_t, int32_t> cached_tokens;
    EngineStats stats;
    KvTierStats tiers;
  };

  // Conversation c's opening (its own 40-token prefix and a question), or
  // its follow-up (the same prefix, another question). Odd conversations
  // sample with a seed.
  static EngineRequest Turn(int c, bool follow_up, const std::string& salt = "") {
    EngineRequest r{.id = RequestId(static_cast<uint64_t>(c + 1 + (follow_up ? 100 : 0)))};
    for (int i = 0; i < kPrefixTokens; ++i) r.prompt.push_back(static_cast<model::TokenId>((c * 53 + i * 7 + 3) % 280));
    for (int i = 0; i < 3; ++i) r.prompt.push_back(static_cast<model::TokenId>((follow_up ? 200 : 100) + c + i));
    r.stopping = {.max_tokens = 8, .ignore_eos = true};
    r.sampling = c % 2 ? SamplingParams{.temperature = 0.9f, .top_k = 40, .seed = static_cast<uint64_t>(c) * 17}
                       : SamplingParams{.temperature = 0.0f};
    r.cache_salt = salt;
    return r;
  }

  static std::vector<EngineRequest> Openings(const std::string& salt = "") {
    std::vector<EngineRequest> out;
    for (int c = 0; c < kConversations; ++c) out.push_back(Turn(c, false, salt));
    return out;
  }
  static std::vector<EngineRequest> FollowUps(const std::string& salt = "") {
    std::vector<EngineRequest> out;
    for (int c = 0; c < kConversations; ++c) out.push_back(Turn(c, true, salt));
    return out;
  }

  // Runs `requests` to completion on a fresh engine (and tiers, if any).
  // max_num_seqs 1 serves them one after another, so by a follow-up's turn
  // the device (24 blocks: under two conversations) has evicted its prefix.
  static Result RunAll(const std::vector<EngineRequest>& requests, const KvTierOptions& tiers,
                       SchedulerConfig config = {.max_num_batched_tokens = 64, .max_num_seqs = 1},
                       int64_t num_blocks = 24, const std::string& model_id = "tiny",
                       kvfleet::testing::RecordingKvListener* listener = nullptr) {
    auto executor = testing::NewTinyExecutor(*model_, num_blocks, kBlockSize, 2);
    std::unique_ptr<KvTierManager> manager;
    EngineOptions options{.model_id = model_id, .scheduler = config};
    if (tiers.enabled()) {
      auto made = CreateKvTiers(tiers, *executor, model_id, listener);
      EXPECT_TRUE(made.ok()) << made.status();
      if (!made.ok()) return {};
      manager = std::move(*made);
      options.kv_tiers = manager.get();
    }
    Result result;
    {
      Engine engine(*executor, options, listener);
      std::map<uint64_t, CollectingSink> sinks;
      for (const EngineRequest& r : requests) EXPECT_TRUE(engine.Submit(r, &sinks[r.id.value()]).ok());
      int steps = 0;
      while (engine.HasWork()) {
        EXPECT_TRUE(engine.Step().ok());
        const absl::Status audit = engine.AuditBlocks();
        EXPECT_TRUE(audit.ok()) << audit;
        if (!audit.ok() || ++steps > 200000) break;
      }
      for (auto& [id, sink] : sinks) {
        EXPECT_TRUE(sink.finished()) << "request " << id;
        result.tokens[id] = sink.tokens();
        result.cached_tokens[id] = sink.usage().cached_prompt_tokens;
      }
      result.stats = engine.Stats();
    }
    if (manager != nullptr) result.tiers = manager->stats();
    return result;
  }

  static std::vector<EngineRequest> Both(const std::string& salt = "") {
    std::vector<EngineRequest> all = Openings(salt);
    for (EngineRequest& r : FollowUps(salt)) all.push_back(r);
    return all;
  }

  // Tokens with no tier and a cache big enough to never evict.
  static const Result& Reference() {
    static const Result* reference =
        new Result(RunAll(Both(), {}, {.max_num_batched_tokens = 64, .max_num_seqs = 1}, /*num_blocks=*/256));
    return *reference;
  }
};

// Room for `blocks` blocks of the tiny model (a disk file's header included).
int64_t TierBytes(int64_t blocks) {
  static const int64_t block_bytes = [] {
    kvfleet::testing::TempDir dir;
    EXPECT_TRUE(
        tools::WriteTinyModel(testing::TestModelShape({.dtype = DType::kQ8_0, .seed = 23}), dir.Path("t.gguf")).ok());
    auto model = model::Model::Load(dir.Path("t.gguf"));
    return testing::NewTinyExecutor(**model, 1, kBlockSize, 1)->info().kv_block_bytes;
  }();
  return blocks * (block_bytes + 256);
}

TEST_F(KvTiersEngineTest, WithoutTiersTheFollowUpsRecomputeTheirPrefixes) {
  const Result plain = RunAll(Both(), {});
  EXPECT_EQ(plain.tokens, Reference().tokens);
  for (int c = 0; c < kConversations; ++c) EXPECT_EQ(plain.cached_tokens.at(c + 101), 0) << "conversation " << c;
  for (int c = 0; c < kConversations; ++c) EXPECT_EQ(Reference().cached_tokens.at(c + 101), kPrefixTokens);
}

TEST_F(KvTiersEngineTest, HostTierServesEvictedPrefixesBitIdentically) {
  kvfleet::testing::RecordingKvListener listener;
  const Result host = RunAll(Both(), {.host_bytes = TierBytes(200)}, {.max_num_batched_tokens = 64, .max_num_seqs = 1},
                             24, "tiny", &listener);
  EXPECT_EQ(host.tokens, Reference().tokens);
  for (int c = 0; c < kConversations; ++c) EXPECT_EQ(host.cached_tokens.at(c + 101), kPrefixTokens) << c;
  EXPECT_GE(host.tiers.host.hit_blocks, (kConversations - 2) * kPrefixTokens / kBlockSize);
  EXPECT_GT(host.tiers.host.bytes_down, 0);
  EXPECT_EQ(host.tiers.disk.capacity_blocks, 0);
  EXPECT_TRUE(listener.errors().empty()) << listener.errors().front();
  int moved_to_host = 0;
  for (const auto& e : listener.events()) {
    moved_to_host += e.kind == kvfleet::testing::KvEvent::Kind::kMoved && e.tier == KvTier::kHost;
  }
  EXPECT_GT(moved_to_host, 0);
}

// After a snapshot the tiers announce what they hold below the device,
// each block after its parent wherever the parent is among them: they hold
// a chain's tail longer than its head, and a child announced first would
// reach the cluster's index with no known place in its chain.
TEST_F(KvTiersEngineTest, ASnapshotAnnouncesTheLowerTiersParentsFirst) {
  kvfleet::testing::RecordingKvListener listener;
  auto executor = testing::NewTinyExecutor(*model_, 24, kBlockSize, 2);
  auto manager = CreateKvTiers({.host_bytes = TierBytes(200)}, *executor, "tiny", &listener);
  ASSERT_TRUE(manager.ok()) << manager.status();
  EngineOptions options{.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 64, .max_num_seqs = 1}};
  options.kv_tiers = manager->get();
  Engine engine(*executor, options, &listener);
  std::map<uint64_t, CollectingSink> sinks;
  for (const EngineRequest& r : Openings()) ASSERT_TRUE(engine.Submit(r, &sinks[r.id.value()]).ok());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  listener.ClearEvents();
  engine.RequestKvSnapshot();
  ASSERT_TRUE(engine.Step().ok());
  absl::flat_hash_set<BlockHash> lower;
  for (const kvfleet::testing::KvEvent& e : listener.events()) {
    if (e.kind == kvfleet::testing::KvEvent::Kind::kMoved) lower.insert(e.hash);
  }
  absl::flat_hash_set<BlockHash> announced;
  int parents_among_them = 0;
  for (const kvfleet::testing::KvEvent& e : listener.events()) {
    if (e.kind != kvfleet::testing::KvEvent::Kind::kMoved) continue;
    if (e.parent.has_value() && lower.contains(*e.parent)) {
      ++parents_among_them;
      EXPECT_TRUE(announced.contains(*e.parent)) << e << " came before its parent";
    }
    announced.insert(e.hash);
  }
  EXPECT_GT(parents_among_them, kConversations) << "whole chains were evicted to the host tier";
}

TEST_F(KvTiersEngineTest, DiskTierServesEvictedPrefixesBitIdentically) {
  kvfleet::testing::TempDir disk;
  const Result result = RunAll(Both(), {.disk_dir = disk.Path("kv"), .disk_bytes = TierBytes(200)});
  EXPECT_EQ(result.tokens, Reference().tokens);
  for (int c = 0; c < kConversations; ++c) EXPECT_EQ(result.cached_tokens.at(c + 101), kPrefixTokens) << c;
  // Every follow-up's prefix came from a cache; most from the disk (where
  // the engine's timing lets a block stay on the device, from there).
  EXPECT_GE(result.tiers.disk.hit_blocks, (kConversations - 2) * kPrefixTokens / kBlockSize);
  EXPECT_GE(result.tiers.disk.loads, kConversations - 1);
  EXPECT_EQ(result.tiers.disk.errors, 0);
}

TEST_F(KvTiersEngineTest, HostSpillsToDiskAndBothServe) {
  kvfleet::testing::TempDir disk;
  const Result result =
      RunAll(Both(), {.host_bytes = TierBytes(12), .disk_dir = disk.Path("kv"), .disk_bytes = TierBytes(200)});
  EXPECT_EQ(result.tokens, Reference().tokens);
  for (int c = 0; c < kConversations; ++c) EXPECT_EQ(result.cached_tokens.at(c + 101), kPrefixTokens) << c;
  EXPECT_GT(result.tiers.host.evictions, 0);
  EXPECT_GT(result.tiers.disk.hit_blocks, 0);
  EXPECT_GT(result.tiers.host.hit_blocks, 0);
}

TEST_F(KvTiersEngineTest, PreemptedRequestsComeBackFromTheHostTierUnchanged) {
  std::vector<EngineRequest> all = Both();
  for (EngineRequest& r : all) r.stopping.max_tokens = 24;
  const Result alone = RunAll(all, {}, {.max_num_batched_tokens = 64, .max_num_seqs = 1}, 256);
  const Result tight = RunAll(all, {.host_bytes = TierBytes(200)},
                              {.max_num_batched_tokens = 64, .max_num_seqs = 8, .growth_reserve_blocks = 0}, 30);
  EXPECT_EQ(tight.tokens, alone.tokens);
  EXPECT_GT(tight.stats.preemptions, 0);
  EXPECT_GT(tight.tiers.host.hit_blocks, 0);
}

TEST_F(KvTiersEngineTest, ARestartedEngineServesHitsFromTheDiskTierItWasLeft) {
  kvfleet::testing::TempDir disk;
  const KvTierOptions tiers{.disk_dir = disk.Path("kv"), .disk_bytes = TierBytes(200)};
  // A device of 256 blocks never evicts: only what is written at eviction
  // reaches the disk, so the first run evicts with a small device.
  RunAll(Openings(), tiers);
  kvfleet::testing::RecordingKvListener listener;
  const Result again =
      RunAll(FollowUps(), tiers, {.max_num_batched_tokens = 64, .max_num_seqs = 1}, 24, "tiny", &listener);
  for (int c = 0; c < kConversations; ++c) {
    EXPECT_EQ(again.tokens.at(c + 101), Reference().tokens.at(c + 101)) << c;
    // The last conversations' prefixes were still on the device when the
    // first engine stopped, and went down with it: those are recomputed.
    if (c < kConversations - 2) {
      EXPECT_EQ(again.cached_tokens.at(c + 101), kPrefixTokens) << c;
    }
  }
  EXPECT_GE(again.tiers.disk.hit_blocks, (kConversations - 2) * kPrefixTokens / kBlockSize);
  EXPECT_EQ(again.tiers.disk.errors, 0);
  // What the router prices the adopted blocks by before any load.
  EXPECT_GT(again.tiers.disk.startup_seconds_per_block, 0.0);
}

TEST_F(KvTiersEngineTest, DamagedForeignAndOtherTenantsFilesAreNeverHits) {
  kvfleet::testing::TempDir disk;
  const KvTierOptions tiers{.disk_dir = disk.Path("kv"), .disk_bytes = TierBytes(200)};
  RunAll(Openings("tenant-a"), tiers);
  // Another tenant's follow-ups: its hashes chain from its own salt.
  const Result other = RunAll(FollowUps("tenant-b"), tiers);
  EXPECT_EQ(other.tiers.disk.hit_blocks, 0);
  // Another model id: another identity, so no file is adopted.
  const Result foreign =
      RunAll(FollowUps("tenant-a"), tiers, {.max_num_batched_tokens = 64, .max_num_seqs = 1}, 24, "tiny-other");
  EXPECT_EQ(foreign.tiers.disk.hit_blocks, 0);
  // Every file damaged: no hit, errors counted, tokens still right.
  int damaged = 0;
  for (const auto& e : std::filesystem::directory_iterator(disk.Path("kv"))) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-9, std::ios::end);
    f.put('\x17');
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  const Result hurt = RunAll(FollowUps("tenant-a"), tiers);
  for (int c = 0; c < kConversations; ++c) {
    const EngineRequest r = Turn(c, true, "tenant-a");
    EXPECT_EQ(hurt.tokens.at(c + 101), RunAll({r}, {}, {.max_num_batched_tokens = 64}, 256, "tiny").tokens.at(c + 101))
        << c;
  }
  EXPECT_EQ(hurt.tiers.disk.hit_blocks, 0);
  EXPECT_GT(hurt.tiers.disk.errors, 0);
}

// A peer's pull (ExportKvBlocks): a prompt's blocks copied out in order,
// from the device or, once evicted, from host memory, up to the first block
// held in neither; an engine that computed the same prompt gives the same
// bytes either way, and each block names its parent.
TEST_F(KvTiersEngineTest, APeersPullCopiesOutThePromptsBlocksInOrderFromDeviceHostOrDisk) {
  const std::vector<BlockHash> prompt_blocks =
      HashFullBlocks(RootBlockHash("tiny", ""), Turn(0, false).prompt, kBlockSize);
  ASSERT_EQ(prompt_blocks.size(), 10u) << "43 tokens: 10 full blocks, the partial one never has a name";
  std::vector<BlockHash> asked = prompt_blocks;
  asked.push_back({.hi = 1, .lo = 1});  // held nowhere: the copy stops here
  asked.push_back(prompt_blocks[0]);    // so this is not sent
  struct Pull {
    std::vector<KvBlockBytes> blocks;
    int64_t host_blocks = 0;
    int64_t disk_blocks = 0;
  };
  kvfleet::testing::TempDir disk;
  enum Where { kDevice, kHost, kDisk };
  const auto pull = [&](Where where) {
    const bool evict = where != kDevice;
    auto executor = testing::NewTinyExecutor(*model_, 24, kBlockSize, 2);
    const KvTierOptions tiers = where == kDisk ? KvTierOptions{.disk_dir = disk.Path("tier"), .disk_bytes = 64 << 20}
                                               : KvTierOptions{.host_bytes = TierBytes(200)};
    auto manager = CreateKvTiers(tiers, *executor, "tiny", nullptr);
    EXPECT_TRUE(manager.ok()) << manager.status();
    EngineOptions options{.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 64, .max_num_seqs = 1}};
    options.kv_tiers = manager->get();
    Engine engine(*executor, options);
    std::map<uint64_t, CollectingSink> sinks;
    // Later conversations push conversation 0's blocks off the 24-block device.
    for (int c = 0; c < (evict ? kConversations : 1); ++c) {
      const EngineRequest r = Turn(c, false);
      EXPECT_TRUE(engine.Submit(r, &sinks[r.id.value()]).ok());
    }
    while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
    (*manager)->FlushDisk();
    Pull out;
    bool called = false;
    engine.ExportKvBlocks(asked, [&](std::vector<KvBlockBytes> blocks) {
      out.blocks = std::move(blocks);
      called = true;
    });
    EXPECT_TRUE(engine.Step().ok()) << "an idle engine serves the pull at its next step";
    // From disk: read in the background, handed over at a later step.
    for (int i = 0; i < 1000 && !called; ++i) {
      (*manager)->FlushDisk();
      EXPECT_TRUE(engine.Step().ok());
    }
    EXPECT_TRUE(called);
    out.host_blocks = (*manager)->stats().host.blocks;
    out.disk_blocks = (*manager)->stats().disk.blocks;
    EXPECT_EQ(out.blocks.empty() ? 0 : static_cast<int64_t>(out.blocks[0].bytes.size()),
              executor->info().kv_block_bytes);
    return out;
  };
  const Pull on_device = pull(kDevice);
  const Pull from_host = pull(kHost);
  const Pull from_disk = pull(kDisk);
  EXPECT_EQ(on_device.host_blocks, 0);
  EXPECT_GE(from_host.host_blocks, static_cast<int64_t>(prompt_blocks.size())) << "conversation 0 went down";
  EXPECT_GE(from_disk.disk_blocks, static_cast<int64_t>(prompt_blocks.size())) << "conversation 0 went down";
  ASSERT_EQ(on_device.blocks.size(), prompt_blocks.size());
  ASSERT_EQ(from_host.blocks.size(), prompt_blocks.size());
  ASSERT_EQ(from_disk.blocks.size(), prompt_blocks.size());
  for (size_t i = 0; i < prompt_blocks.size(); ++i) {
    for (const Pull* p : {&on_device, &from_host, &from_disk}) {
      EXPECT_EQ(p->blocks[i].hash, prompt_blocks[i]);
      EXPECT_EQ(p->blocks[i].parent, i == 0 ? std::nullopt : std::optional<BlockHash>(prompt_blocks[i - 1]));
      EXPECT_TRUE(p->blocks[i].published);
    }
    EXPECT_EQ(on_device.blocks[i].bytes, from_host.blocks[i].bytes) << "block " << i;
    EXPECT_EQ(on_device.blocks[i].bytes, from_disk.blocks[i].bytes) << "block " << i;
  }
}

using testing::EngineFetcher;

// A prompt of `tokens` tokens (conversation 0's opening, cut or grown).
EngineRequest PeerPrompt(int tokens, uint64_t id, bool seeded) {
  EngineRequest r{.id = RequestId(id)};
  for (int i = 0; i < tokens; ++i) r.prompt.push_back(static_cast<model::TokenId>((i * 7 + 3) % 280));
  r.stopping = {.max_tokens = 8, .ignore_eos = true};
  r.sampling =
      seeded ? SamplingParams{.temperature = 0.9f, .top_k = 40, .seed = 5} : SamplingParams{.temperature = 0.0f};
  return r;
}

struct PeerRun {
  std::vector<model::TokenId> tokens;
  int32_t cached = 0;
  KvPeerStats stats;
  size_t asked = 0;
};

// `request` on a fresh engine B whose prefix A computed (A ran the same
// prompt first); with `peer_blocks` > 0 B is told A holds that many.
PeerRun RunWithPeer(const model::Model& model, const EngineRequest& request, int32_t peer_blocks,
                    std::function<void(std::vector<KvBlockBytes>&, absl::Status&)> fault = nullptr) {
  auto executor_a = testing::NewTinyExecutor(model, 64, kBlockSize, 2);
  auto executor_b = testing::NewTinyExecutor(model, 64, kBlockSize, 2);
  const EngineOptions plain{.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 64, .max_num_seqs = 4}};
  Engine a(*executor_a, plain);
  CollectingSink sink_a;
  EngineRequest first = request;
  first.id = RequestId(999);
  EXPECT_TRUE(a.Submit(first, &sink_a).ok());
  while (a.HasWork()) EXPECT_TRUE(a.Step().ok());
  EngineFetcher fetcher(a);
  fetcher.fault = std::move(fault);
  EngineOptions options = plain;
  options.kv_peer_fetcher = &fetcher;
  PeerRun out;
  {
    Engine b(*executor_b, options);
    EngineRequest r = request;
    if (peer_blocks > 0) r.kv_peer = KvPeerSource{.endpoint = "worker-a:7002", .blocks = peer_blocks};
    CollectingSink sink;
    EXPECT_TRUE(b.Submit(r, &sink).ok());
    int steps = 0;
    while (b.HasWork() && ++steps < 10000) {
      EXPECT_TRUE(b.Step().ok());
      EXPECT_TRUE(b.AuditBlocks().ok());
    }
    EXPECT_TRUE(sink.finished());
    out.tokens = sink.tokens();
    out.cached = sink.usage().cached_prompt_tokens;
    out.stats = b.Stats().kv_peer;
  }
  EXPECT_TRUE(fetcher.endpoints.empty() || fetcher.endpoints[0] == "worker-a:7002");
  out.asked = fetcher.asked.empty() ? 0 : fetcher.asked[0];
  return out;
}

// Peer prefix fetch: B copies the prompt's blocks from A instead of
// computing them, and its tokens are those of computing everything itself
// (greedy and seeded), for a prompt whose last block is partial and one
// that is an exact multiple of the block size (whose last block is pulled
// but its last token still computed, for the logits).
TEST_F(KvTiersEngineTest, APulledPrefixGivesTheTokensOfComputingItHere) {
  for (const int tokens : {43, 40}) {
    for (const bool seeded : {false, true}) {
      const EngineRequest r = PeerPrompt(tokens, 1, seeded);
      const PeerRun alone = RunWithPeer(*model_, r, 0);
      EXPECT_EQ(alone.cached, 0);
      const PeerRun pulled = RunWithPeer(*model_, r, tokens / kBlockSize);
      EXPECT_EQ(pulled.tokens, alone.tokens) << tokens << " tokens, seeded " << seeded;
      // Neither a partial last block nor a full one that ends the prompt
      // (its last token is computed for its logits, so no hit covers it).
      EXPECT_EQ(pulled.asked, static_cast<size_t>((tokens - 1) / kBlockSize)) << tokens << " tokens";
      EXPECT_EQ(pulled.cached, (tokens - 1) / kBlockSize * kBlockSize) << tokens << " tokens";
      EXPECT_EQ(pulled.stats.pulls_done, 1);
      EXPECT_EQ(pulled.stats.blocks_pulled, (tokens - 1) / kBlockSize);
      EXPECT_GT(pulled.stats.bytes_pulled, 0);
    }
  }
}

// A pull that fails never fails the request: refused, cut off after a few
// blocks, or a peer that holds fewer, the rest is computed here and the
// tokens are the same.
TEST_F(KvTiersEngineTest, AFailedOrShortPullComputesTheRestWithTheSameTokens) {
  const EngineRequest r = PeerPrompt(43, 1, /*seeded=*/true);
  const PeerRun alone = RunWithPeer(*model_, r, 0);
  const PeerRun refused = RunWithPeer(*model_, r, 10, [](std::vector<KvBlockBytes>& b, absl::Status& s) {
    b.clear();
    s = absl::FailedPreconditionError("KV dtype differs");
  });
  EXPECT_EQ(refused.tokens, alone.tokens);
  EXPECT_EQ(refused.cached, 0);
  EXPECT_EQ(refused.stats.pulls_failed, 1);
  const PeerRun cut = RunWithPeer(*model_, r, 10, [](std::vector<KvBlockBytes>& b, absl::Status& s) {
    b.resize(4);
    s = absl::DataLossError("checksum mismatch");
  });
  EXPECT_EQ(cut.tokens, alone.tokens);
  EXPECT_EQ(cut.cached, 4 * kBlockSize) << "the whole blocks before the damage are kept";
  EXPECT_EQ(cut.stats.pulls_failed, 1);
  EXPECT_EQ(cut.stats.blocks_pulled, 4);
  const PeerRun fewer = RunWithPeer(*model_, r, 10, [](std::vector<KvBlockBytes>& b, absl::Status&) { b.resize(6); });
  EXPECT_EQ(fewer.tokens, alone.tokens);
  EXPECT_EQ(fewer.cached, 6 * kBlockSize);
  EXPECT_EQ(fewer.stats.pulls_partial, 1);
}

TEST_F(KvTiersEngineTest, BadTierOptionsAreRefusedByName) {
  auto executor = testing::NewTinyExecutor(*model_, 24, kBlockSize, 1);
  auto small = CreateKvTiers({.host_bytes = 10}, *executor, "tiny", nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(small.status())) << small.status();
  EXPECT_NE(small.status().message().find("two blocks"), std::string::npos) << small.status();
  auto sizeless = CreateKvTiers({.disk_dir = "/tmp/x"}, *executor, "tiny", nullptr);
  EXPECT_NE(sizeless.status().message().find("needs a size"), std::string::npos) << sizeless.status();
}

}  // namespace
}  // namespace kvfleet::engine
