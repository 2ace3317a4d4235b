// LoRA adapters in the engine, on this binary's backend (the CPU, the CUDA
// kernels on the host emulation, the CPU twin of tensor parallelism): a
// request's tokens are the same alone, in a step mixed with other adapters'
// and the base model's rows, chunked, cached, preempted, speculative, and
// when its adapter must wait for a slot. Adapters change the tokens, and KV
// is shared only under the same adapter with the same weights.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/self_speculative_proposer.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/test_executor.h"
#include "tests/unit/engine/tiny_model_suite.h"
#include "tools/tiny_model/tiny_lora.h"

namespace kvfleet::engine {
namespace {

constexpr int32_t kBlockSize = 4;

class LoraEngineTest : public TinyModelSuite {
 protected:
  static void SetUpTestSuite() {
    LoadTinyModel({.dtype = DType::kQ8_0, .seed = 41});
    // Every projection at rank 4; only q and v at rank 8.
    a_ = new std::shared_ptr<const model::LoraAdapter>(std::make_shared<const model::LoraAdapter>(
        tools::RandomLoraAdapter(*model_, {.name = "a", .rank = 4, .seed = 1})));
    b_ = new std::shared_ptr<const model::LoraAdapter>(
        std::make_shared<const model::LoraAdapter>(tools::RandomLoraAdapter(
            *model_,
            {.name = "b", .rank = 8, .seed = 2, .targets = {model::Projection::kAttnQ, model::Projection::kAttnV}})));
  }
  static void TearDownTestSuite() {
    delete a_;
    delete b_;
    TinyModelSuite::TearDownTestSuite();
  }

  std::unique_ptr<ModelExecutor> Executor(int32_t max_loras, int64_t num_blocks = 256) {
    return testing::NewExecutor(*model_, {.num_blocks = testing::PagesForBlocks(*model_, num_blocks),
                                          .block_size = kBlockSize,
                                          .num_threads = 2,
                                          .lora = {.max_loras = max_loras, .max_rank = 8},
                                          .limits = testing::kRoomyLimits});
  }

  std::map<uint64_t, std::vector<model::TokenId>> RunAll(const std::vector<EngineRequest>& requests,
                                                         SchedulerConfig config, int32_t max_loras = 2,
                                                         int64_t num_blocks = 256, const std::string& proposer = "off",
                                                         EngineStats* stats = nullptr) {
    auto executor = Executor(max_loras, num_blocks);
    // The draft model is the base model itself, without adapters: its
    // guesses are the base's, verified under each request's adapter.
    auto draft = *spec::DraftModelProposer::Create(nullptr, Executor(0, 512), executor->info());
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
      EXPECT_NE(sink.reason(), FinishReason::kError) << "request " << id;
      out[id] = sink.tokens();
    }
    return out;
  }

  // Nine requests over a, b and the base model in turn; the even ones share
  // a 13-token prefix (3 full blocks), the others are their own; repeats in
  // every prompt (n-gram drafts find some); greedy, and seeded every third.
  static std::vector<EngineRequest> Requests() {
    std::mt19937 rng(23);
    std::vector<model::TokenId> shared;
    for (int i = 0; i < 13; ++i) shared.push_back(static_cast<model::TokenId>(rng() % 250));
    std::vector<EngineRequest> out;
    for (uint64_t i = 1; i <= 9; ++i) {
      EngineRequest r{.id = RequestId(i)};
      if (i % 2 == 0) r.prompt = shared;
      std::vector<model::TokenId> motif;
      for (int j = 0; j < 3; ++j) motif.push_back(static_cast<model::TokenId>(rng() % 250));
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k)
        r.prompt.insert(r.prompt.end(), motif.begin(), motif.end());
      r.stopping = {.max_tokens = 6 + static_cast<int32_t>(rng() % 6), .ignore_eos = true};
      r.sampling = i % 3 == 0 ? SamplingParams{.temperature = 0.8f, .top_k = 40, .seed = 700 + i}
                              : SamplingParams{.temperature = 0.0f};
      r.lora = i % 3 == 1 ? *a_ : i % 3 == 2 ? *b_ : nullptr;
      out.push_back(std::move(r));
    }
    return out;
  }

  static inline std::shared_ptr<const model::LoraAdapter>* a_ = nullptr;
  static inline std::shared_ptr<const model::LoraAdapter>* b_ = nullptr;
};

TEST_F(LoraEngineTest, MixedAdapterStepsAgreeAloneBatchedChunkedCachedPreemptedAndSpeculative) {
  const std::vector<EngineRequest> requests = Requests();
  std::map<uint64_t, std::vector<model::TokenId>> alone;
  for (const EngineRequest& r : requests) {
    alone[r.id.value()] = RunAll({r}, {.max_num_batched_tokens = 4096})[r.id.value()];
  }
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 64, .max_num_seqs = 32}), alone) << "batched";
  for (int32_t chunk : {1, 3}) EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = chunk}), alone) << chunk;
  EngineStats cached;
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 4096, .max_num_seqs = 1}, 2, 256, "off", &cached), alone)
      << "one at a time: shared prefixes cached";
  EXPECT_GT(cached.prefix_hit_tokens, 0);
  EngineStats tight;
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 128, .growth_reserve_blocks = 0}, 2, 14, "off", &tight), alone)
      << "preempted";
  EXPECT_GT(tight.preemptions, 0);
  EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 64, .max_num_seqs = 32}, /*max_loras=*/1), alone)
      << "one slot: each adapter's requests wait for it";
  for (const std::string proposer : {"ngram", "self", "draft"}) {
    EngineStats spec;
    EXPECT_EQ(RunAll(requests, {.max_num_batched_tokens = 64, .max_num_seqs = 32}, 2, 256, proposer, &spec), alone)
        << proposer;
    int64_t drafted = 0;
    for (const SpeculationStats& p : spec.speculation) drafted += p.drafted_tokens;
    EXPECT_GT(drafted, 0) << proposer;
  }
}

TEST_F(LoraEngineTest, AdaptersChangeTheTokensAndShareKvOnlyUnderTheSameWeights) {
  std::mt19937 rng(5);
  EngineRequest r{
      .id = RequestId(1), .sampling = {.temperature = 0.0f}, .stopping = {.max_tokens = 8, .ignore_eos = true}};
  for (int i = 0; i < 17; ++i) r.prompt.push_back(static_cast<model::TokenId>(rng() % 250));
  auto executor = Executor(2);
  Engine engine(*executor, {.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 4096}});
  // One after another on one engine: what each finds cached.
  uint64_t next_id = 1;
  const auto run = [&](std::shared_ptr<const model::LoraAdapter> lora) {
    EngineRequest q = r;
    q.id = RequestId(next_id++);
    q.lora = std::move(lora);
    kvfleet::testing::CollectingSink sink;
    EXPECT_TRUE(engine.Submit(q, &sink).ok());
    while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
    return std::make_pair(sink.tokens(), sink.usage().cached_prompt_tokens);
  };
  const auto base = run(nullptr);
  const auto a = run(*a_);
  const auto b = run(*b_);
  EXPECT_NE(a.first, base.first) << "adapter a changes the tokens";
  EXPECT_NE(b.first, base.first) << "adapter b changes the tokens";
  EXPECT_EQ(a.second, 0) << "a finds none of the base model's KV";
  EXPECT_EQ(b.second, 0) << "b finds none of a's or the base model's";
  // Adapter a again: its own KV, and its tokens.
  const auto a_again = run(*a_);
  EXPECT_EQ(a_again, std::make_pair(a.first, 16));
  // The same name with new weights: a new identity, so none of the old KV.
  auto retrained = std::make_shared<const model::LoraAdapter>(
      tools::RandomLoraAdapter(*model_, {.name = "a", .rank = 4, .seed = 9}));
  const auto a_new = run(retrained);
  EXPECT_EQ(a_new.second, 0) << "the old weights' KV is not the new weights'";
  EXPECT_NE(a_new.first, a.first);
  EXPECT_EQ(run(nullptr), std::make_pair(base.first, 16)) << "the base model's cache is its own";
}

TEST_F(LoraEngineTest, RefusesAnAdapterItCannotHold) {
  auto without = Executor(0);
  Engine plain(*without, {.model_id = "tiny"});
  kvfleet::testing::CollectingSink sink;
  EngineRequest r{.id = RequestId(1), .prompt = {1, 2, 3}, .stopping = {.max_tokens = 2}};
  r.lora = *a_;
  const absl::Status refused = plain.Submit(r, &sink);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--max-loras"), std::string_view::npos) << refused;

  auto small = testing::NewExecutor(*model_, {.num_blocks = 64,
                                              .block_size = kBlockSize,
                                              .lora = {.max_loras = 1, .max_rank = 4},
                                              .limits = testing::kRoomyLimits});
  Engine engine(*small, {.model_id = "tiny"});
  r.lora = *b_;  // rank 8
  const absl::Status too_big = engine.Submit(r, &sink);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.message().find("rank 8"), std::string_view::npos) << too_big;
}

}  // namespace
}  // namespace kvfleet::engine
