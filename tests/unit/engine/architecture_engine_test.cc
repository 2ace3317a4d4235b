// Exactness on a tiny model of every architecture, on this binary's backend
// (the CPU, and the CUDA kernels on the host emulation): Qwen2 with its
// biases, Qwen3 with its head norms, Llama with Llama 3's scaled RoPE, and
// Gemma 3 with a sliding window of 8 (six layers, one global) — so prompts
// run past the window, prefill chunks of 1, 3 and 7 end on both sides of
// its edge, and prefix-cache hits of 20 tokens reach past it. Alone =
// batched = chunked = cached = preempted = speculative (n-gram, self,
// draft), greedy and seeded; Gemma's window pages freed
// (model/arch/kv_page_groups.h) or kept.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/kv/tiers/kv_tier_manager.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/self_speculative_proposer.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/recording_kv_listener.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

constexpr int32_t kBlockSize = 4;

struct Architecture {
  std::string name;
  tools::TinyModelOptions options;
};

void PrintTo(const Architecture& a, std::ostream* os) { *os << a.name; }

const Architecture kArchitectures[] = {
    {"qwen2", {.architecture = "qwen2", .dtype = DType::kQ8_0, .seed = 31, .num_layers = 2}},
    {"qwen3", {.architecture = "qwen3", .dtype = DType::kQ8_0, .seed = 32, .num_layers = 2}},
    {"gemma3", {.architecture = "gemma3", .dtype = DType::kQ8_0, .seed = 33, .num_layers = 6, .sliding_window = 8}},
    {"llama3", {.architecture = "llama", .dtype = DType::kQ8_0, .seed = 34, .num_layers = 2, .llama3_rope = true}},
};

class ArchitectureEngineTest : public ::testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools::WriteTinyModel(GetParam().options, dir_.Path("t.gguf")).ok());
    auto m = model::Model::Load(dir_.Path("t.gguf"));
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }

  std::map<uint64_t, std::vector<model::TokenId>> RunAll(const std::vector<EngineRequest>& requests,
                                                         SchedulerConfig config, int64_t num_blocks = 256,
                                                         const std::string& proposer = "off",
                                                         EngineStats* stats = nullptr, bool free_window_blocks = true) {
    auto executor =
        testing::NewExecutor(*model_, {.num_blocks = testing::PagesForBlocks(*model_, num_blocks, free_window_blocks),
                                       .block_size = kBlockSize,
                                       .num_threads = 2,
                                       .free_window_blocks = free_window_blocks,
                                       .limits = testing::kRoomyLimits});
    // The draft model is the target itself (its own pool keeps one table a
    // sequence: one page group); self-speculation uses its first layer.
    auto draft_executor = testing::NewExecutor(*model_, {.num_blocks = 512,
                                                         .block_size = kBlockSize,
                                                         .num_threads = 2,
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
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) r.prompt.insert(r.prompt.end(), motif.begin(), motif.end());
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
  for (const EngineRequest& r : requests) alone[r.id.value()] = RunAll({r}, {.max_num_batched_tokens = 4096})[r.id.value()];
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

// Gemma 3's windowed layers give back the pages their window has passed.
// Two 60-token conversations in a cache whose memory holds 27 blocks of
// every layer (1.5 of them) preempt each other when every page is kept,
// and run side by side when window pages are freed: same tokens either way.
TEST_P(ArchitectureEngineTest, FreedWindowPagesHoldMoreConversationsWithTheSameTokens) {
  if (GetParam().name != "gemma3") GTEST_SKIP() << GetParam().name << " has no sliding window";
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

// With a host-memory tier under a device cache of under two conversations,
// window pages freed: group 0's pages and the window's go down the tier
// and come back as prefix hits; tokens equal a run with neither tier nor
// eviction, and every step's block accounting audits.
TEST_P(ArchitectureEngineTest, WindowPagesFreedUnderAHostTierKeepEveryToken) {
  if (GetParam().name != "gemma3") GTEST_SKIP() << GetParam().name << " has no sliding window";
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
  const SchedulerConfig one_at_a_time{.max_num_batched_tokens = 16, .max_num_seqs = 1};
  const std::map<uint64_t, std::vector<model::TokenId>> reference =
      RunAll(requests, one_at_a_time, 256, "off", nullptr, false);

  auto executor = testing::NewExecutor(*model_, {.num_blocks = testing::PagesForBlocks(*model_, 20),
                                                 .block_size = kBlockSize,
                                                 .num_threads = 2,
                                                 .limits = testing::kRoomyLimits});
  ASSERT_GT(executor->info().kv_groups.num_groups(), 1);
  // Window pages never reach the disk, so a disk tier is refused, naming the ways out.
  kvfleet::testing::TempDir disk;
  auto with_disk = KvTierManager::Create({.disk_dir = disk.Path("kv"), .disk_bytes = 1 << 20}, *executor, "tiny",
                                         nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(with_disk.status())) << with_disk.status();
  EXPECT_NE(with_disk.status().message().find("--keep-window-blocks"), std::string::npos) << with_disk.status();
  kvfleet::testing::RecordingKvListener listener;
  auto tiers =
      KvTierManager::Create({.host_bytes = 512 * executor->info().kv_block_bytes}, *executor, "tiny", &listener);
  ASSERT_TRUE(tiers.ok()) << tiers.status();
  EngineOptions options{.model_id = "tiny", .scheduler = one_at_a_time};
  options.kv_tiers = tiers->get();
  Engine engine(*executor, options, &listener);
  std::map<uint64_t, kvfleet::testing::CollectingSink> sinks;
  for (const EngineRequest& r : requests) ASSERT_TRUE(engine.Submit(r, &sinks[r.id.value()]).ok());
  for (int steps = 0; engine.HasWork() && steps < 100000; ++steps) {
    ASSERT_TRUE(engine.Step().ok());
    const absl::Status audit = engine.AuditBlocks();
    ASSERT_TRUE(audit.ok()) << audit;
  }
  std::map<uint64_t, std::vector<model::TokenId>> tokens;
  for (auto& [id, sink] : sinks) tokens[id] = sink.tokens();
  EXPECT_EQ(tokens, reference);
  // Group 0's pages and the window's went down to host memory and came back
  // as hits: each follow-up's 40-token prefix.
  EXPECT_GT((*tiers)->stats().host.hit_blocks, 0);
  EXPECT_EQ(engine.Stats().prefix_hit_tokens, 5 * 40);
  // The cluster hears of block hashes only, never a window page's derived one.
  absl::flat_hash_set<BlockHash> blocks;
  for (const EngineRequest& r : requests) {
    std::vector<model::TokenId> all = r.prompt;
    all.insert(all.end(), tokens[r.id.value()].begin(), tokens[r.id.value()].end());
    for (const BlockHash& h : HashFullBlocks(RootBlockHash("tiny", ""), all, kBlockSize)) blocks.insert(h);
  }
  EXPECT_TRUE(listener.errors().empty());
  for (const kvfleet::testing::KvEvent& e : listener.events()) {
    if (e.kind != kvfleet::testing::KvEvent::Kind::kCleared) {
      EXPECT_TRUE(blocks.contains(e.hash)) << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, ArchitectureEngineTest, ::testing::ValuesIn(kArchitectures),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kvfleet::engine
