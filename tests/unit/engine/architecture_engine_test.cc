// Exactness on a tiny model of every architecture of the registry
// (tests/testing/tiny_architectures.h), on this binary's backend (the CPU,
// and the CUDA kernels on the host emulation). Windowed layers get a window
// of 8 (Gemma 3: six layers, one global), so prompts run past the window,
// prefill chunks of 1, 3 and 7 end on both sides of its edge, and
// prefix-cache hits of 20 tokens reach past it. Alone = batched = chunked =
// cached = preempted = speculative (n-gram, self, draft), greedy and seeded;
// window pages freed (model/arch/kv_page_groups.h) or kept.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/executor_kv_tiers.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/self_speculative_proposer.h"
#include "model/arch/kv_page_groups.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/recording_kv_listener.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tests/testing/tiny_architectures.h"
#include "tests/unit/engine/engine_peer_fetcher.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

constexpr int32_t kBlockSize = 4;

class ArchitectureEngineTest : public ::testing::TestWithParam<testing::TinyArchitecture> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools::WriteTinyModel(GetParam().options, dir_.Path("t.gguf")).ok());
    auto m = model::Model::Load(dir_.Path("t.gguf"));
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }

  // Alone, batched, chunked, cached, preempted and speculative agree in this KV format.
  void ExpectKvFormatAgrees(kernels::KvCacheDtype kv);

  std::map<uint64_t, std::vector<model::TokenId>> RunAll(const std::vector<EngineRequest>& requests,
                                                         SchedulerConfig config, int64_t num_blocks = 256,
                                                         const std::string& proposer = "off",
                                                         EngineStats* stats = nullptr, bool free_window_blocks = true,
                                                         kernels::KvCacheDtype kv = kernels::KvCacheDtype::kF16) {
    auto executor =
        testing::NewExecutor(*model_, {.num_blocks = testing::PagesForBlocks(*model_, num_blocks, free_window_blocks),
                                       .block_size = kBlockSize,
                                       .num_threads = 2,
                                       .kv_cache_dtype = kv,
                                       .key_channel_scales = testing::TestKeyScales(*model_, kv),
                                       .free_window_blocks = free_window_blocks,
                                       .limits = testing::kRoomyLimits});
    // The draft model is the target itself (its own pool keeps one table a
    // sequence: one page group); self-speculation uses its first layer.
    auto draft_executor = testing::NewExecutor(*model_, {.num_blocks = 512,
                                                         .block_size = kBlockSize,
                                                         .num_threads = 2,
                                                         .kv_cache_dtype = kv,
                                                         .key_channel_scales = testing::TestKeyScales(*model_, kv),
                                                         .free_window_blocks = false,
                                                         .limits = testing::kRoomyLimits});
    auto draft = *spec::DraftModelProposer::Create(nullptr, std::move(draft_executor), executor->info());
    spec::NgramProposer ngram({.min_n = 1, .max_n = 3});
    spec::SelfSpeculativeProposer self(*executor, 1);
    EngineOptions options{.model_id = "tiny", .scheduler = config};
    options.proposers = {&ngram, &self, draft.get()};
    options.speculation = {.proposer = proposer, .max_draft_tokens = 4, .adaptive = false};
    Engine engine(*executor, options);
    std::map<uint64_t, kvfleet::testing::CollectingSink> sinks;
    for (const EngineRequest& r : requests) EXPECT_TRUE(engine.Submit(r, &sinks[r.id.value()]).ok());
    int steps = 0;
    while (engine.HasWork()) {
      EXPECT_TRUE(engine.Step().ok());
      EXPECT_LT(++steps, 100000) << "engine does not make progress";
    }
    if (stats != nullptr) *stats = engine.Stats();
    std::map<uint64_t, std::vector<model::TokenId>> out;
    for (auto& [id, sink] : sinks) {
      EXPECT_TRUE(sink.finished()) << "request " << id;
      out[id] = sink.tokens();
    }
    return out;
  }

  // Half share a 23-token prefix (5 full blocks: a cache hit of 20 tokens,
  // past Gemma's window of 8), half are their own; prompts of up to 30
  // tokens with repeats in them (n-gram drafts find some); greedy and seeded.
  static std::vector<EngineRequest> Requests() {
    std::mt19937 rng(17);
    std::vector<model::TokenId> shared;
    for (int i = 0; i < 23; ++i) shared.push_back(static_cast<model::TokenId>(rng() % 280));
    std::vector<EngineRequest> out;
    for (uint64_t i = 1; i <= 6; ++i) {
      EngineRequest r{.id = RequestId(i)};
      if (i % 2 == 0) r.prompt = shared;
      std::vector<model::TokenId> motif;
      for (int j = 0; j < 3; ++j) motif.push_back(static_cast<model::TokenId>(rng() % 280));
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k)
        r.prompt.insert(r.prompt.end(), motif.begin(), motif.end());
      r.stopping = {.max_tokens = 6 + static_cast<int32_t>(rng() % 8), .ignore_eos = true};
      r.sampling = i % 3 == 0 ? SamplingParams{.temperature = 0.8f, .top_k = 40, .seed = 500 + i}
                              : SamplingParams{.temperature = 0.0f};
      out.push_back(std::move(r));
    }
    return out;
  }

  kvfleet::testing::TempDir dir_;
  std::unique_ptr<model::Model> model_;
};

TEST_P(ArchitectureEngineTest, AloneBatchedChunkedCachedPreemptedAndSpeculativeAgree) {
  const std::vector<EngineRequest> requests = Requests();
  std::map<uint64_t, std::vector<model::TokenId>> alone;
  for (const EngineRequest& r : requests)
    alone[r.id.value()] = RunAll({r}, {.max_num_batched_tokens = 4096})[r.id.value()];
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 64, .max_num_seqs = 32}), alone) << "batched";
  for (int32_t chunk : {1, 3, 7}) {
    EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = chunk}), alone) << "chunks of " << chunk;
  }
  EngineStats cached;
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 4096, .max_num_seqs = 1}, 256, "off", &cached), alone)
      << "one at a time: the shared prefix cached";
  EXPECT_GE(cached.prefix_hit_tokens, 2 * 20);
  EngineStats tight;
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 128, .growth_reserve_blocks = 0}, 16, "off", &tight), alone)
      << "preempted";
  EXPECT_GT(tight.preemptions, 0);
  for (const std::string proposer : {"ngram", "self", "draft"}) {
    EngineStats spec;
    EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 64, .max_num_seqs = 32}, 256, proposer, &spec), alone)
        << proposer;
    int64_t drafted = 0;
    for (const SpeculationStats& p : spec.speculation) drafted += p.drafted_tokens;
    EXPECT_GT(drafted, 0) << proposer;
  }
}

// 8-bit KV caches keep every exactness rule within their format, on every
// architecture: the query's scaling and rotation and the key's are per row,
// so no schedule changes a token. Every format on the CPU; on the CUDA
// backends (the emulation takes seconds a format) scaled keys, whose path
// holds every step of the rotated format's (the op harness checks each
// format's kernels on every backend).
TEST_P(ArchitectureEngineTest, EightBitKvAgreesAloneBatchedChunkedCachedAndPreempted) {
  std::vector<kernels::KvCacheDtype> formats = {kernels::KvCacheDtype::kInt8RotatedScaled};
  if (testing::TestBackendName().starts_with("cpu")) {
    formats.insert(formats.end(), {kernels::KvCacheDtype::kInt8, kernels::KvCacheDtype::kInt8Rotated,
                                   kernels::KvCacheDtype::kFp8E4M3});
  }
  for (const kernels::KvCacheDtype kv : formats) {
    SCOPED_TRACE(kernels::KvCacheDtypeName(kv));
    ExpectKvFormatAgrees(kv);
  }
}

void ArchitectureEngineTest::ExpectKvFormatAgrees(kernels::KvCacheDtype kv) {
  const std::vector<EngineRequest> requests = Requests();
  std::map<uint64_t, std::vector<model::TokenId>> alone;
  for (const EngineRequest& r : requests) {
    alone[r.id.value()] = RunAll({r}, {.max_num_batched_tokens = 4096}, 256, "off", nullptr, true, kv)[r.id.value()];
  }
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 64, .max_num_seqs = 32}, 256, "off", nullptr, true, kv), alone)
      << "batched";
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 3}, 256, "off", nullptr, true, kv), alone) << "chunks of 3";
  EngineStats cached;
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 4096, .max_num_seqs = 1}, 256, "off", &cached, true, kv), alone)
      << "one at a time: the shared prefix cached";
  EXPECT_GE(cached.prefix_hit_tokens, 2 * 20);
  EngineStats tight;
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 128, .growth_reserve_blocks = 0}, 16, "off", &tight, true, kv),
            alone)
      << "preempted";
  EXPECT_GT(tight.preemptions, 0);
  EngineStats spec;
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 64, .max_num_seqs = 32}, 256, "ngram", &spec, true, kv), alone)
      << "speculative";
}

// Windowed layers (Gemma 3's local ones) give back the pages their window
// has passed.
// Two 60-token conversations in a cache whose memory holds 27 blocks of
// every layer (1.5 of them) preempt each other when every page is kept,
// and run side by side when window pages are freed: same tokens either way.
TEST_P(ArchitectureEngineTest, FreedWindowPagesHoldMoreConversationsWithTheSameTokens) {
  if (!model::KvPageGroupsFor(model_->config(), true).frees_window_blocks()) {
    GTEST_SKIP() << GetParam().name << " frees no window pages (no windowed layers beside global ones)";
  }
  std::mt19937 rng(23);
  std::vector<EngineRequest> requests;
  for (uint64_t id = 1; id <= 2; ++id) {
    EngineRequest r{.id = RequestId(id), .stopping = {.max_tokens = 12, .ignore_eos = true}};
    for (int i = 0; i < 60; ++i) r.prompt.push_back(static_cast<model::TokenId>(rng() % 280));
    r.sampling =
        id == 2 ? SamplingParams{.temperature = 0.8f, .top_k = 40, .seed = 9} : SamplingParams{.temperature = 0.0f};
    requests.push_back(std::move(r));
  }
  std::map<uint64_t, std::vector<model::TokenId>> alone;
  for (const EngineRequest& r : requests) {
    alone[r.id.value()] = RunAll({r}, {.max_num_batched_tokens = 4096}, 256, "off", nullptr, false)[r.id.value()];
  }
  const SchedulerConfig chunked{.max_num_batched_tokens = 16, .growth_reserve_blocks = 0};
  EngineStats kept, freed;
  EXPECT_EQ(RunAll(requests, chunked, 27, "off", &kept, false), alone) << "every page kept";
  EXPECT_GT(kept.preemptions, 0);
  EXPECT_EQ(RunAll(requests, chunked, 27, "off", &freed, true), alone) << "window pages freed";
  EXPECT_EQ(freed.preemptions, 0);
  // Cached, after the window pages were given back and cached themselves.
  EngineStats cached;
  std::vector<EngineRequest> again = requests;
  again.push_back(requests[0]);
  again.back().id = RequestId(3);
  alone[3] = alone[1];
  EXPECT_EQ(RunAll(again, {.max_num_batched_tokens = 4096, .max_num_seqs = 1}, 256, "off", &cached, true), alone);
  EXPECT_GE(cached.prefix_hit_tokens, 56);
}

// Two turns of five conversations: each follow-up shares its conversation's
// 40-token prefix (ten blocks, past the window of 8); greedy and seeded.
std::vector<EngineRequest> FollowUps() {
  std::vector<EngineRequest> requests;
  for (int turn = 0; turn < 2; ++turn) {
    for (int c = 0; c < 5; ++c) {
      EngineRequest r{.id = RequestId(static_cast<uint64_t>(1 + c + 10 * turn)),
                      .stopping = {.max_tokens = 6, .ignore_eos = true}};
      for (int i = 0; i < 40; ++i) r.prompt.push_back(static_cast<model::TokenId>((c * 53 + i * 7 + 3) % 280));
      for (int i = 0; i < 3; ++i) r.prompt.push_back(static_cast<model::TokenId>(100 + 100 * turn + c + i));
      r.sampling = c % 2 ? SamplingParams{.temperature = 0.9f, .top_k = 40, .seed = 7u + c}
                         : SamplingParams{.temperature = 0.0f};
      requests.push_back(std::move(r));
    }
  }
  return requests;
}

struct TieredRun {
  std::map<uint64_t, std::vector<model::TokenId>> tokens;
  int64_t prefix_hit_tokens = 0;
  KvTierStats tiers;
};

// Window pages freed, one request at a time over a device cache of 20
// blocks' pages (under two conversations) with `tier_options` below it;
// every step's block accounting audited. The cluster must hear of
// `block_hashes` only (those of every conversation the tiers have seen),
// never a window page's derived hash.
TieredRun RunTiered(const model::Model& model, const std::vector<EngineRequest>& requests,
                    const KvTierOptions& tier_options, const absl::flat_hash_set<BlockHash>& block_hashes) {
  TieredRun run;
  auto executor = testing::NewExecutor(model, {.num_blocks = testing::PagesForBlocks(model, 20),
                                               .block_size = kBlockSize,
                                               .num_threads = 2,
                                               .limits = testing::kRoomyLimits});
  EXPECT_GT(executor->info().kv_groups.num_groups(), 1);
  kvfleet::testing::RecordingKvListener listener;
  auto tiers = CreateKvTiers(tier_options, *executor, "tiny", &listener);
  EXPECT_TRUE(tiers.ok()) << tiers.status();
  if (!tiers.ok()) return run;
  EngineOptions options{.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 16, .max_num_seqs = 1}};
  options.kv_tiers = tiers->get();
  Engine engine(*executor, options, &listener);
  (*tiers)->OnSnapshot({});  // as a worker does at start: what the disk kept is announced
  std::map<uint64_t, kvfleet::testing::CollectingSink> sinks;
  for (const EngineRequest& r : requests) EXPECT_TRUE(engine.Submit(r, &sinks[r.id.value()]).ok());
  for (int steps = 0; engine.HasWork() && steps < 100000; ++steps) {
    EXPECT_TRUE(engine.Step().ok());
    const absl::Status audit = engine.AuditBlocks();
    EXPECT_TRUE(audit.ok()) << audit;
    if (!audit.ok()) break;
    (*tiers)->FlushDisk();  // the disk keeps up with the tiny model's evictions
  }
  for (auto& [id, sink] : sinks) run.tokens[id] = sink.tokens();
  run.prefix_hit_tokens = engine.Stats().prefix_hit_tokens;
  run.tiers = (*tiers)->stats();
  EXPECT_TRUE(listener.errors().empty());
  for (const kvfleet::testing::KvEvent& e : listener.events()) {
    if (e.kind != kvfleet::testing::KvEvent::Kind::kCleared) {
      EXPECT_TRUE(block_hashes.contains(e.hash)) << e;
    }
  }
  return run;
}

// Under a host-memory tier, a disk tier, or both, group 0's pages and the
// window's go down and come back as prefix hits: each follow-up's 40-token
// prefix, with the tokens of a run with neither tier nor eviction.
TEST_P(ArchitectureEngineTest, WindowPagesFreedUnderLowerTiersKeepEveryToken) {
  if (!model::KvPageGroupsFor(model_->config(), true).frees_window_blocks()) {
    GTEST_SKIP() << GetParam().name << " frees no window pages (no windowed layers beside global ones)";
  }
  const std::vector<EngineRequest> requests = FollowUps();
  const std::map<uint64_t, std::vector<model::TokenId>> reference =
      RunAll(requests, {.max_num_batched_tokens = 16, .max_num_seqs = 1}, 256, "off", nullptr, false);
  auto probe =
      testing::NewExecutor(*model_, {.num_blocks = 8, .block_size = kBlockSize, .limits = testing::kRoomyLimits});
  const int64_t page_bytes = probe->info().kv_block_bytes;
  absl::flat_hash_set<BlockHash> blocks;
  for (const EngineRequest& r : requests) {
    std::vector<model::TokenId> all = r.prompt;
    all.insert(all.end(), reference.at(r.id.value()).begin(), reference.at(r.id.value()).end());
    for (const BlockHash& h : HashFullBlocks(RootBlockHash("tiny", ""), all, kBlockSize)) blocks.insert(h);
  }

  const TieredRun host = RunTiered(*model_, requests, {.host_bytes = 512 * page_bytes}, blocks);
  EXPECT_EQ(host.tokens, reference) << "host memory";
  EXPECT_GT(host.tiers.host.hit_blocks, 0);
  EXPECT_EQ(host.prefix_hit_tokens, 5 * 40);

  // Disk only: every page the device gives up is written, the window's
  // marked unpublished, and a follow-up's pages come back in one load.
  const TieredRun disk = RunTiered(*model_, requests, {.disk_dir = dir_.Path("disk"), .disk_bytes = 64 << 20}, blocks);
  EXPECT_EQ(disk.tokens, reference) << "disk";
  EXPECT_GT(disk.tiers.disk.hit_blocks, 0);
  EXPECT_EQ(disk.tiers.disk.errors, 0);
  EXPECT_EQ(disk.prefix_hit_tokens, 5 * 40);

  // Host memory of four pages over the disk: pages pass through both.
  const TieredRun both = RunTiered(
      *model_, requests, {.host_bytes = 4 * page_bytes, .disk_dir = dir_.Path("both"), .disk_bytes = 64 << 20}, blocks);
  EXPECT_EQ(both.tokens, reference) << "host memory over disk";
  EXPECT_GT(both.tiers.disk.hit_blocks, 0);
  EXPECT_EQ(both.prefix_hit_tokens, 5 * 40);

  // A restart on the disk tier: the second turn alone finds its prefixes
  // (group 0's pages and the window's, adopted) on disk.
  const std::vector<EngineRequest> second_turn(requests.begin() + 5, requests.end());
  const TieredRun restarted =
      RunTiered(*model_, second_turn, {.disk_dir = dir_.Path("disk"), .disk_bytes = 64 << 20}, blocks);
  for (const EngineRequest& r : second_turn) {
    EXPECT_EQ(restarted.tokens.at(r.id.value()), reference.at(r.id.value())) << "after a restart: " << r.id.value();
  }
  EXPECT_GT(restarted.tiers.disk.hit_blocks, 0);
  EXPECT_EQ(restarted.prefix_hit_tokens, 5 * 40);
}

// A prefix pulled from a peer engine gives the tokens of computing it here,
// in the float KV format and an 8-bit one. With page groups the pull brings
// the window pages the hit's end reaches too (under their derived hashes),
// or the hit would stop short of them.
TEST_P(ArchitectureEngineTest, APulledPrefixGivesTheTokensOfComputingItHere) {
  std::mt19937 rng(41);
  EngineRequest r{.id = RequestId(1), .stopping = {.max_tokens = 10, .ignore_eos = true}};
  for (int i = 0; i < 61; ++i) r.prompt.push_back(static_cast<model::TokenId>(rng() % 280));
  r.sampling = SamplingParams{.temperature = 0.8f, .top_k = 40, .seed = 3};
  for (const kernels::KvCacheDtype kv : {kernels::KvCacheDtype::kF16, kernels::KvCacheDtype::kInt8RotatedScaled}) {
    SCOPED_TRACE(kernels::KvCacheDtypeName(kv));
    auto executor = [&] {
      return testing::NewExecutor(*model_, {.num_blocks = testing::PagesForBlocks(*model_, 64, true),
                                            .block_size = kBlockSize,
                                            .num_threads = 2,
                                            .kv_cache_dtype = kv,
                                            .key_channel_scales = testing::TestKeyScales(*model_, kv),
                                            .limits = testing::kRoomyLimits});
    };
    const EngineOptions options{.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 16}};
    auto run = [&](Engine& engine, const EngineRequest& request) {
      testing::CollectingSink sink;
      EXPECT_TRUE(engine.Submit(request, &sink).ok());
      for (int steps = 0; engine.HasWork() && steps < 10000; ++steps) {
        EXPECT_TRUE(engine.Step().ok());
        EXPECT_TRUE(engine.AuditBlocks().ok());
      }
      EXPECT_TRUE(sink.finished());
      return std::make_pair(sink.tokens(), sink.usage().cached_prompt_tokens);
    };
    auto executor_a = executor();
    Engine a(*executor_a, options);
    const auto computed = run(a, r);
    EXPECT_EQ(computed.second, 0);
    testing::EngineFetcher fetcher(a);
    EngineOptions pulling = options;
    pulling.kv_peer_fetcher = &fetcher;
    auto executor_b = executor();
    Engine b(*executor_b, pulling);
    EngineRequest pulled = r;
    pulled.kv_peer = KvPeerSource{.endpoint = "a:7002", .blocks = 61 / kBlockSize};
    const auto got = run(b, pulled);
    EXPECT_EQ(got.first, computed.first);
    EXPECT_EQ(got.second, 60) << "every full block before the last token, window pages included";
    EXPECT_EQ(b.Stats().kv_peer.pulls_done, 1);
    EXPECT_GT(b.Stats().kv_peer.seconds_per_block, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, ArchitectureEngineTest,
                         ::testing::ValuesIn(testing::TinyArchitectures(testing::TestModelShape({.dtype = DType::kQ8_0,
                                                                                                 .seed = 31}))),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kvfleet::engine
