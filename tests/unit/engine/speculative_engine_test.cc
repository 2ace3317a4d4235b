// Speculative decoding in the engine: with every proposer, drafting and
// verification change no token (greedy and seeded), inside mixed batches,
// under small token budgets and preemption; sampling keeps the model's
// distribution; rejected guesses leave no block behind and no hash
// published; the per-request opt-out and the validation of choices.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "common/block_hash.h"
#include "engine/engine.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/heads_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/self_speculative_proposer.h"
#include "engine/spec/suffix_proposer.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/draft_heads.h"
#include "tests/testing/recording_kv_listener.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::CollectingSink;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kVocab = 280;

// Guesses uniformly at random: nearly every guess is rejected, which is
// what the rollback tests want.
class RandomProposer final : public spec::Proposer {
 public:
  std::string_view name() const override { return "random"; }
  absl::Status Propose(std::span<spec::DraftSlot> slots) override {
    for (spec::DraftSlot& s : slots) {
      s.draft.clear();
      for (int32_t i = 0; i < s.max_tokens; ++i) s.draft.push_back(static_cast<model::TokenId>(rng_() % kVocab));
    }
    return absl::OkStatus();
  }

 private:
  std::mt19937 rng_{3};
};

// Trees of guesses: decoys first at every depth, then (when it knows the
// answer) the token plain decoding produced there, so a kept path is off
// the first branch and its KV must move; decoys get children of their own.
// Without an answer, a random tree (nearly every guess rejected).
class TreeProposer final : public spec::Proposer {
 public:
  // answers: each request's full plain-decoding text (prompt and output).
  explicit TreeProposer(const std::map<uint64_t, std::vector<model::TokenId>>* answers) : answers_(answers) {}
  std::string_view name() const override { return "tree"; }
  absl::Status Propose(std::span<spec::DraftSlot> slots) override {
    for (spec::DraftSlot& s : slots) {
      s.draft.clear();
      s.parents.clear();
      const std::vector<model::TokenId>* answer = nullptr;
      if (answers_ != nullptr) {
        const auto it = answers_->find(s.id.value());
        if (it != answers_->end()) answer = &it->second;
      }
      const auto add = [&](model::TokenId token, int32_t parent) {
        if (static_cast<int32_t>(s.draft.size()) >= s.max_tokens) return -2;
        s.draft.push_back(token);
        s.parents.push_back(parent);
        return static_cast<int32_t>(s.draft.size()) - 1;
      };
      const auto decoy = [&] { return static_cast<model::TokenId>(rng_() % kVocab); };
      int32_t parent = -1;
      for (size_t depth = 0; parent >= -1 && static_cast<int32_t>(s.draft.size()) < s.max_tokens; ++depth) {
        const size_t at = s.context.size() + depth;
        if (answer == nullptr || at >= answer->size()) {
          // Random: any earlier node (or the pending token) as parent.
          add(decoy(), static_cast<int32_t>(rng_() % (s.draft.size() + 1)) - 1);
          continue;
        }
        for (uint32_t d = rng_() % 3; d > 0; --d) {
          const int32_t decoy_node = add(decoy(), parent);
          if (decoy_node >= 0 && rng_() % 2 == 0) add(decoy(), decoy_node);
        }
        parent = add((*answer)[at], parent);
      }
    }
    return absl::OkStatus();
  }

 private:
  const std::map<uint64_t, std::vector<model::TokenId>>* answers_;
  std::mt19937 rng_{5};
};

// The executor of a backend that cannot move KV between slots: the engine
// must recompute a kept path off the first branch instead.
class NoKvMoveExecutor final : public ModelExecutor {
 public:
  explicit NoKvMoveExecutor(std::unique_ptr<ModelExecutor> inner) : inner_(std::move(inner)) {}
  const ExecutorInfo& info() const override { return inner_->info(); }
  ExecutorMemory memory() const override { return inner_->memory(); }
  absl::StatusOr<DeviceFreeMemory> FreeMemory() const override { return inner_->FreeMemory(); }
  absl::Status AllocateKvCache(int64_t num_blocks) override { return inner_->AllocateKvCache(num_blocks); }
  absl::StatusOr<ForwardOutput> Forward(const ForwardBatch& batch) override { return inner_->Forward(batch); }

 private:
  std::unique_ptr<ModelExecutor> inner_;
};

struct SpecSetup {
  std::string proposer = spec::kProposerOff;  // the worker's default
  int32_t max_draft_tokens = 4;
  bool adaptive = false;
  int32_t heads_top_k = 1;
  // For "tree": each request's plain-decoding text (null: random trees).
  const std::map<uint64_t, std::vector<model::TokenId>>* answers = nullptr;
  bool executor_moves_kv = true;
};

class SpeculativeEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new kvfleet::testing::TempDir();
    ASSERT_TRUE(
        tools::WriteTinyModel(testing::TestModelShape({.dtype = DType::kQ8_0, .seed = 21}), dir_->Path("t.gguf")).ok());
    model_ = model::Model::Load(dir_->Path("t.gguf"))->release();
    // Untrained heads repeat the target's own next guess: some are right.
    kvfleet::testing::WriteDraftHeads(*model_, dir_->Path("heads"), {.num_heads = 3, .scale = 0.02f});
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }

  struct Run {
    std::map<uint64_t, std::vector<model::TokenId>> tokens;
    std::map<uint64_t, FinishReason> reasons;
    EngineStats stats;
    std::vector<kvfleet::testing::KvEvent> events;
    std::vector<std::string> event_errors;
  };

  static int64_t Drafted(const EngineStats& s) {
    int64_t n = 0;
    for (const SpeculationStats& p : s.speculation) n += p.drafted_tokens;
    return n;
  }
  static int64_t Accepted(const EngineStats& s) {
    int64_t n = 0;
    for (const SpeculationStats& p : s.speculation) n += p.accepted_tokens;
    return n;
  }

  // Every request to completion on a fresh engine with every proposer
  // loaded, auditing the block accounting after each step.
  static Run RunAll(const std::vector<EngineRequest>& requests, const SpecSetup& setup, SchedulerConfig config,
                    int64_t num_blocks = 512) {
    std::unique_ptr<ModelExecutor> executor = testing::NewTinyExecutor(*model_, num_blocks, kBlockSize, 2);
    if (!setup.executor_moves_kv) executor = std::make_unique<NoKvMoveExecutor>(std::move(executor));
    // The draft model is the target itself: greedy guesses are then always
    // right, which exercises long acceptances.
    auto draft_executor = testing::NewTinyExecutor(*model_, 512, kBlockSize, 2);
    auto draft = *spec::DraftModelProposer::Create(nullptr, std::move(draft_executor), executor->info());
    spec::NgramProposer ngram({.min_n = 1, .max_n = 3});
    spec::SelfSpeculativeProposer self(*executor, 1);
    spec::SuffixProposer suffix({});
    spec::HeadsProposer heads(*spec::DraftHeads::Load(dir_->Path("heads"), *model_, "t.gguf"),
                              executor->info().weight_bytes, setup.heads_top_k);
    RandomProposer random;
    TreeProposer tree(setup.answers);
    kvfleet::testing::RecordingKvListener listener;
    EngineOptions options{.model_id = "tiny", .scheduler = config};
    options.proposers = {&ngram, &suffix, &self, draft.get(), &heads, &random, &tree};
    options.speculation = {.proposer = setup.proposer, .max_draft_tokens = setup.max_draft_tokens,
                           .adaptive = setup.adaptive};
    EXPECT_TRUE(options.Validate().ok()) << options.Validate();
    Engine engine(*executor, options, &listener);
    std::map<uint64_t, CollectingSink> sinks;
    for (const EngineRequest& r : requests) {
      const absl::Status submitted = engine.Submit(r, &sinks[r.id.value()]);
      EXPECT_TRUE(submitted.ok()) << submitted;
    }
    int steps = 0;
    while (engine.HasWork()) {
      EXPECT_TRUE(engine.Step().ok());
      const absl::Status audit = engine.AuditBlocks();
      EXPECT_TRUE(audit.ok()) << audit << " after step " << steps;
      EXPECT_LT(++steps, 100000) << "engine does not make progress";
      if (!audit.ok()) break;
    }
    Run run;
    for (auto& [id, sink] : sinks) {
      EXPECT_TRUE(sink.finished()) << "request " << id;
      run.tokens[id] = sink.tokens();
      run.reasons[id] = sink.reason();
    }
    run.stats = engine.Stats();
    run.events = listener.events();
    run.event_errors = listener.errors();
    EXPECT_EQ(run.stats.blocks_used, 0) << "blocks still held after every request finished";
    EXPECT_EQ(draft->blocks_in_use(), 0) << "the draft model kept blocks of finished requests";
    return run;
  }

  // Prompts with repeats in them (so n-gram lookup finds something), half
  // greedy and half seeded, some opted out, some with a shorter k.
  static std::vector<EngineRequest> MixedRequests(int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<EngineRequest> out;
    for (int i = 0; i < n; ++i) {
      EngineRequest r{.id = RequestId(i + 1)};
      std::vector<model::TokenId> motif;
      for (int j = 0; j < 3 + static_cast<int>(rng() % 5); ++j) motif.push_back(static_cast<model::TokenId>(rng() % kVocab));
      const int repeats = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < repeats; ++k) r.prompt.insert(r.prompt.end(), motif.begin(), motif.end());
      r.prompt.push_back(static_cast<model::TokenId>(rng() % kVocab));
      r.stopping = {.max_tokens = 4 + static_cast<int32_t>(rng() % 30), .ignore_eos = true};
      r.sampling = i % 2 == 0 ? SamplingParams{.temperature = 0.0f}
                              : SamplingParams{.temperature = 0.8f, .top_k = 20, .seed = 1000u + i};
      if (i % 5 == 3) r.speculation.proposer = spec::kProposerOff;
      if (i % 7 == 2) r.speculation.max_draft_tokens = 2;
      out.push_back(std::move(r));
    }
    return out;
  }

  static kvfleet::testing::TempDir* dir_;
  static model::Model* model_;
};

kvfleet::testing::TempDir* SpeculativeEngineTest::dir_ = nullptr;
model::Model* SpeculativeEngineTest::model_ = nullptr;

TEST_F(SpeculativeEngineTest, EveryProposerLeavesEveryTokenUnchangedInMixedBatches) {
  const std::vector<EngineRequest> requests = MixedRequests(24, 7);
  const Run plain = RunAll(requests, {}, {.max_num_batched_tokens = 64, .max_num_seqs = 32});
  EXPECT_EQ(Drafted(plain.stats), 0);
  for (const std::string proposer : {"ngram", "suffix", "self", "draft", "heads", "random", "auto"}) {
    for (int32_t k : {1, 4, 8}) {
      const Run spec = RunAll(requests, {.proposer = proposer, .max_draft_tokens = k},
                              {.max_num_batched_tokens = 64, .max_num_seqs = 32});
      EXPECT_EQ(spec.tokens, plain.tokens) << proposer << " k=" << k;
      EXPECT_GT(Drafted(spec.stats), 0) << proposer << " k=" << k << " never drafted";
      if (proposer == "draft") {
        // The target as its own draft guesses every greedy token right.
        std::vector<EngineRequest> greedy;
        for (const EngineRequest& r : requests) {
          if (r.sampling.greedy() && r.speculation.proposer.empty()) greedy.push_back(r);
        }
        const Run exact = RunAll(greedy, {.proposer = proposer, .max_draft_tokens = k}, {});
        EXPECT_GT(Drafted(exact.stats), 0);
        EXPECT_EQ(Accepted(exact.stats), Drafted(exact.stats)) << "k=" << k;
      }
      if (proposer == "ngram" || proposer == "suffix" || proposer == "self" || proposer == "heads") {
        EXPECT_GT(Accepted(spec.stats), 0) << proposer;
      }
    }
  }
  // The adaptive length too: lookups draft first and the step keeps what
  // pays, sized by the draft's evidence.
  for (const std::string proposer : {"ngram", "suffix", "auto"}) {
    const Run adaptive = RunAll(requests, {.proposer = proposer, .max_draft_tokens = 8, .adaptive = true},
                                {.max_num_batched_tokens = 64, .max_num_seqs = 32});
    EXPECT_EQ(adaptive.tokens, plain.tokens) << proposer << " adaptive";
  }
}

// Each request's whole text after plain decoding: what the tree proposer
// hides among its decoys.
std::map<uint64_t, std::vector<model::TokenId>> Answers(
    const std::vector<EngineRequest>& requests, const std::map<uint64_t, std::vector<model::TokenId>>& outputs) {
  std::map<uint64_t, std::vector<model::TokenId>> answers;
  for (const EngineRequest& r : requests) {
    std::vector<model::TokenId>& a = answers[r.id.value()];
    a = r.prompt;
    a.insert(a.end(), outputs.at(r.id.value()).begin(), outputs.at(r.id.value()).end());
  }
  return answers;
}

TEST_F(SpeculativeEngineTest, TreeDraftsKeepEveryTokenAndTheKeptPathsKv) {
  const std::vector<EngineRequest> requests = MixedRequests(24, 7);
  const SchedulerConfig config{.max_num_batched_tokens = 96, .max_num_seqs = 32};
  const Run plain = RunAll(requests, {}, config);
  const auto answers = Answers(requests, plain.tokens);
  for (int32_t k : {2, 5, 12, 32}) {
    // The answer off the first branch: every kept guess but the first
    // branch's moves its KV, then later tokens attend to it.
    const Run oracle = RunAll(requests, {.proposer = "tree", .max_draft_tokens = k, .answers = &answers}, config);
    EXPECT_EQ(oracle.tokens, plain.tokens) << "k=" << k;
    EXPECT_GT(Accepted(oracle.stats), 0) << "k=" << k;
    const Run random = RunAll(requests, {.proposer = "tree", .max_draft_tokens = k}, config);
    EXPECT_EQ(random.tokens, plain.tokens) << "random trees, k=" << k;
    EXPECT_GT(Drafted(random.stats), 0);
  }
  // An executor that cannot move KV: the kept guesses are recomputed.
  const Run recomputed = RunAll(
      requests, {.proposer = "tree", .max_draft_tokens = 8, .answers = &answers, .executor_moves_kv = false}, config);
  EXPECT_EQ(recomputed.tokens, plain.tokens);
  EXPECT_GT(Accepted(recomputed.stats), 0);
  // Draft heads' own trees, fixed and adaptive.
  for (bool adaptive : {false, true}) {
    const Run heads =
        RunAll(requests, {.proposer = "heads", .max_draft_tokens = 8, .adaptive = adaptive, .heads_top_k = 3}, config);
    EXPECT_EQ(heads.tokens, plain.tokens) << "adaptive " << adaptive;
    if (!adaptive) {
      EXPECT_GT(Drafted(heads.stats), 0);
    }
  }
}

TEST_F(SpeculativeEngineTest, TreeDraftsSurviveSmallBudgetsAndPreemption) {
  const std::vector<EngineRequest> requests = MixedRequests(12, 11);
  const Run plain = RunAll(requests, {}, {.max_num_batched_tokens = 512, .max_num_seqs = 32});
  const auto answers = Answers(requests, plain.tokens);
  int64_t preemptions = 0;
  for (int32_t budget : {2, 5, 9, 64}) {
    const Run spec = RunAll(requests, {.proposer = "tree", .max_draft_tokens = 8, .answers = &answers},
                            {.max_num_batched_tokens = budget, .max_num_seqs = 32, .growth_reserve_blocks = 0},
                            /*num_blocks=*/18);
    EXPECT_EQ(spec.tokens, plain.tokens) << "budget " << budget;
    preemptions += spec.stats.preemptions;
  }
  EXPECT_GT(preemptions, 0) << "the pool was meant to force preemption";
}

TEST_F(SpeculativeEngineTest, SmallBudgetsAndPreemptionKeepEveryToken) {
  const std::vector<EngineRequest> requests = MixedRequests(12, 11);
  const Run plain = RunAll(requests, {}, {.max_num_batched_tokens = 512, .max_num_seqs = 32});
  for (const std::string proposer : {"draft", "self", "random"}) {
    // Budgets too small for whole drafts; a pool that forces preemptions
    // (no growth reserve: admit into the last blocks, so growth preempts).
    int64_t preemptions = 0;
    for (int32_t budget : {2, 5, 9, 64}) {
      const Run spec = RunAll(requests, {.proposer = proposer, .max_draft_tokens = 8},
                              {.max_num_batched_tokens = budget, .max_num_seqs = 32, .growth_reserve_blocks = 0},
                              /*num_blocks=*/18);
      EXPECT_EQ(spec.tokens, plain.tokens) << proposer << " budget " << budget;
      preemptions += spec.stats.preemptions;
    }
    EXPECT_GT(preemptions, 0) << "the pool was meant to force preemption";
  }
}

// Allows at output position i only tokens t with t % 5 == i % 5: a stateful
// constraint whose mask depends on every token accepted before. It counts
// where and when its masks were prepared.
class ModuloConstraint final : public TokenConstraint {
 public:
  struct Counts {
    int64_t masks = 0;              // MaskLogits calls
    int64_t prepared_used = 0;      // of those, with the mask prepared for that state
    int64_t prepared_on_engine = 0; // PrepareMask calls on the engine thread
  };

  explicit ModuloConstraint(std::shared_ptr<Counts> counts = std::make_shared<Counts>(),
                            std::thread::id engine_thread = {})
      : counts_(std::move(counts)), engine_thread_(engine_thread) {}

  void PrepareMask() override {
    prepared_for_ = accepted_;
    if (std::this_thread::get_id() == engine_thread_) ++counts_->prepared_on_engine;
  }
  void MaskLogits(std::span<float> logits) override {
    ++counts_->masks;
    if (prepared_for_ == accepted_) ++counts_->prepared_used;
    for (size_t t = 0; t < logits.size(); ++t) {
      if (static_cast<int64_t>(t % 5) != accepted_ % 5) logits[t] = -std::numeric_limits<float>::infinity();
    }
  }
  bool Accept(model::TokenId token) override {
    if (token % 5 != accepted_ % 5) return false;
    ++accepted_;
    return true;
  }

 private:
  std::shared_ptr<Counts> counts_;
  std::thread::id engine_thread_;
  int64_t accepted_ = 0;
  int64_t prepared_for_ = -1;
};

// The requests with a fresh constraint each (a run must not share state).
std::vector<EngineRequest> Constrained(std::vector<EngineRequest> requests) {
  for (EngineRequest& r : requests) r.constraint = std::make_shared<ModuloConstraint>();
  return requests;
}

TEST_F(SpeculativeEngineTest, ConstrainedOutputIsTheSameBatchedPreemptedAndSpeculative) {
  const std::vector<EngineRequest> requests = MixedRequests(12, 17);
  const Run plain = RunAll(Constrained(requests), {}, {.max_num_batched_tokens = 512, .max_num_seqs = 32});
  for (const auto& [id, tokens] : plain.tokens) {
    for (size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ(tokens[i] % 5, static_cast<int32_t>(i % 5)) << id;
  }
  // Alone, one at a time, equals batched.
  for (const EngineRequest& r : requests) {
    const Run alone = RunAll(Constrained({r}), {}, {});
    EXPECT_EQ(alone.tokens.at(r.id.value()), plain.tokens.at(r.id.value())) << r.id.value();
  }
  int64_t preemptions = 0;
  for (const std::string proposer : {"draft", "self", "random"}) {
    for (int32_t budget : {3, 64}) {
      const Run spec = RunAll(Constrained(requests), {.proposer = proposer, .max_draft_tokens = 8},
                              {.max_num_batched_tokens = budget, .max_num_seqs = 32, .growth_reserve_blocks = 0},
                              /*num_blocks=*/18);
      EXPECT_EQ(spec.tokens, plain.tokens) << proposer << " budget " << budget;
      preemptions += spec.stats.preemptions;
    }
  }
  EXPECT_GT(preemptions, 0) << "the pool was meant to force preemption";
}

TEST_F(SpeculativeEngineTest, MasksArePreparedOffTheEngineThreadBeforeSampling) {
  // RunAll steps the engine on this thread.
  auto counts = std::make_shared<ModuloConstraint::Counts>();
  std::vector<EngineRequest> requests = MixedRequests(8, 29);
  for (EngineRequest& r : requests) r.constraint = std::make_shared<ModuloConstraint>(counts, std::this_thread::get_id());
  const Run plain = RunAll(requests, {}, {.max_num_batched_tokens = 64, .max_num_seqs = 8});
  int64_t tokens = 0;
  for (const auto& [id, t] : plain.tokens) tokens += static_cast<int64_t>(t.size());
  // Without drafts every token's mask was prepared during its forward pass.
  EXPECT_EQ(counts->masks, tokens);
  EXPECT_EQ(counts->prepared_used, counts->masks);
  EXPECT_EQ(counts->prepared_on_engine, 0);
  // With drafts, a verified guess moves the state: the rows after it mask on
  // demand, and the tokens stay the same.
  auto spec_counts = std::make_shared<ModuloConstraint::Counts>();
  for (EngineRequest& r : requests) r.constraint = std::make_shared<ModuloConstraint>(spec_counts, std::this_thread::get_id());
  const Run spec = RunAll(requests, {.proposer = "draft", .max_draft_tokens = 4},
                          {.max_num_batched_tokens = 64, .max_num_seqs = 8});
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_LT(spec_counts->prepared_used, spec_counts->masks);
  EXPECT_GT(spec_counts->prepared_used, 0);
  EXPECT_EQ(spec_counts->prepared_on_engine, 0);
}

TEST_F(SpeculativeEngineTest, AResumedConstrainedRequestReplaysItsTokens) {
  std::vector<EngineRequest> requests = MixedRequests(4, 23);
  const Run whole = RunAll(Constrained(requests), {}, {});
  // Resume each after its first half (a failover): the rest is the same.
  std::vector<EngineRequest> resumed = Constrained(requests);
  for (EngineRequest& r : resumed) {
    const std::vector<model::TokenId>& t = whole.tokens.at(r.id.value());
    r.resumed_output.assign(t.begin(), t.begin() + t.size() / 2);
  }
  const Run rest = RunAll(resumed, {}, {});
  for (const EngineRequest& r : resumed) {
    std::vector<model::TokenId> joined = r.resumed_output;
    const std::vector<model::TokenId>& tail = rest.tokens.at(r.id.value());
    joined.insert(joined.end(), tail.begin(), tail.end());
    EXPECT_EQ(joined, whole.tokens.at(r.id.value())) << r.id.value();
  }
}

TEST_F(SpeculativeEngineTest, StopTokensInsideAcceptedDraftsEndTheRequestThere) {
  std::vector<EngineRequest> requests = MixedRequests(10, 3);
  const Run free_running = RunAll(requests, {}, {});
  // Stop at the fifth token each request produced.
  for (EngineRequest& r : requests) {
    const std::vector<model::TokenId>& out = free_running.tokens.at(r.id.value());
    if (out.size() > 4) r.stopping.stop_token_ids = {out[4]};
  }
  const Run plain = RunAll(requests, {}, {});
  const Run spec = RunAll(requests, {.proposer = "draft", .max_draft_tokens = 8}, {});
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.reasons, plain.reasons);
}

TEST_F(SpeculativeEngineTest, RejectedGuessesLeaveNoBlockAndNoPublishedHash) {
  std::vector<EngineRequest> requests = MixedRequests(16, 5);
  for (EngineRequest& r : requests) {
    r.stopping.max_tokens = 60;
    r.speculation = {};
  }
  const Run spec = RunAll(requests, {.proposer = "random", .max_draft_tokens = 8},
                          {.max_num_batched_tokens = 48, .max_num_seqs = 16}, /*num_blocks=*/120);
  ASSERT_GT(Drafted(spec.stats), 500);
  EXPECT_LT(Accepted(spec.stats), Drafted(spec.stats) / 10) << "random guesses should mostly fail";
  EXPECT_TRUE(spec.event_errors.empty()) << spec.event_errors.front();
  // Every published hash is a block of a request's real tokens.
  absl::flat_hash_set<BlockHash> real;
  for (const EngineRequest& r : requests) {
    std::vector<model::TokenId> seq = r.prompt;
    const std::vector<model::TokenId>& out = spec.tokens.at(r.id.value());
    seq.insert(seq.end(), out.begin(), out.end());
    BlockHash parent = RootBlockHash("tiny", r.cache_salt);
    for (size_t b = 0; (b + 1) * kBlockSize <= seq.size(); ++b) {
      parent = ChainBlockHash(parent, std::span<const int32_t>(seq.data() + b * kBlockSize, kBlockSize));
      real.insert(parent);
    }
  }
  int stored = 0;
  for (const kvfleet::testing::KvEvent& e : spec.events) {
    if (e.kind != kvfleet::testing::KvEvent::Kind::kStored) continue;
    ++stored;
    EXPECT_TRUE(real.contains(e.hash)) << "published a block no request's tokens fill: " << e;
  }
  EXPECT_GT(stored, 50);
}

// The suffix proposer learns from finished requests: a request that writes
// what an earlier one wrote drafts it from the store, and every guess is
// right, while its tokens stay plain decoding's.
TEST_F(SpeculativeEngineTest, SuffixDraftsFromEarlierOutputs) {
  auto executor = testing::NewTinyExecutor(*model_, 256, kBlockSize, 2);
  spec::SuffixProposer suffix({});
  EngineOptions options{.model_id = "tiny"};
  options.proposers = {&suffix};
  options.speculation = {.proposer = "suffix", .max_draft_tokens = 8, .adaptive = false};
  Engine engine(*executor, options);
  std::vector<std::vector<model::TokenId>> outputs;
  std::vector<SpeculationStats> after;
  for (uint64_t id : {1, 2}) {
    CollectingSink sink;
    EngineRequest r{.id = RequestId(id), .prompt = {11, 12, 13, 14, 15}};
    r.sampling.temperature = 0.0f;
    r.stopping.max_tokens = 40;
    r.stopping.ignore_eos = true;
    ASSERT_TRUE(engine.Submit(r, &sink).ok());
    while (engine.HasWork()) {
      ASSERT_TRUE(engine.Step().ok());
      ASSERT_TRUE(engine.AuditBlocks().ok());
    }
    outputs.push_back(sink.tokens());
    after.push_back(engine.Stats().speculation[0]);
  }
  EXPECT_EQ(outputs[0], outputs[1]);
  ASSERT_NE(suffix.store(), nullptr);
  EXPECT_EQ(suffix.store()->num_sequences(), 2);
  const int64_t drafted = after[1].drafted_tokens - after[0].drafted_tokens;
  const int64_t accepted = after[1].accepted_tokens - after[0].accepted_tokens;
  EXPECT_GT(drafted, 20);
  EXPECT_EQ(accepted, drafted);
}

TEST_F(SpeculativeEngineTest, OptedOutRequestsNeverDraft) {
  std::vector<EngineRequest> requests = MixedRequests(8, 9);
  for (EngineRequest& r : requests) r.speculation.proposer = spec::kProposerOff;
  const Run run = RunAll(requests, {.proposer = "draft"}, {});
  EXPECT_EQ(Drafted(run.stats), 0);
  // And a request may pick a proposer the worker does not default to.
  for (EngineRequest& r : requests) r.speculation.proposer = "draft";
  EXPECT_GT(Drafted(RunAll(requests, {}, {}).stats), 0);
}

TEST_F(SpeculativeEngineTest, UnknownProposersAndImpossibleDraftLengthsAreRefused) {
  auto executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 1);
  spec::NgramProposer ngram({});
  EngineOptions options{.model_id = "tiny"};
  options.proposers = {&ngram};
  options.speculation = {.proposer = "ngram", .max_draft_tokens = 4};
  Engine engine(*executor, options);
  CollectingSink sink;
  EngineRequest r{.id = RequestId(1), .prompt = {1, 2, 3}};
  r.speculation.proposer = "eagle";
  absl::Status s = engine.Submit(r, &sink);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("\"eagle\" is not loaded"), std::string::npos) << s;
  EXPECT_NE(s.message().find("ngram"), std::string::npos) << s;
  r.speculation = {.max_draft_tokens = 33};
  s = engine.Submit(r, &sink);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_draft_tokens"), std::string::npos) << s;

  EngineOptions no_proposer{.model_id = "tiny"};
  no_proposer.speculation = {.proposer = "self"};
  EXPECT_EQ(no_proposer.Validate().code(), absl::StatusCode::kInvalidArgument);
}

// Chi-square test of homogeneity at significance 1e-4: the probability
// that a correct implementation fails it for a random choice of seeds.
// (Wilson–Hilferty approximation of the chi-square quantile.)
double ChiSquareCritical(int df) {
  const double z = 3.719;  // one-sided 1e-4 normal quantile
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

TEST_F(SpeculativeEngineTest, SpeculativeSamplingKeepsTheModelsDistribution) {
  // The first four sampled tokens of one prompt, over many seeds: seeds
  // [1, N] without speculation, [N + 1, 2N] with (so the samples are
  // independent), compared as distributions of 4-token continuations.
  constexpr int kN = 1500;
  auto make = [](uint64_t first_seed) {
    std::vector<EngineRequest> rs;
    for (int i = 0; i < kN; ++i) {
      EngineRequest r{.id = RequestId(i + 1), .prompt = {5, 17, 42, 99, 5, 17, 42}};
      r.sampling = {.temperature = 0.6f, .top_k = 4, .seed = first_seed + i};
      r.stopping = {.max_tokens = 4, .ignore_eos = true};
      rs.push_back(std::move(r));
    }
    return rs;
  };
  const SchedulerConfig config{.max_num_batched_tokens = 4096, .max_num_seqs = 256};
  const Run plain = RunAll(make(1), {}, config, /*num_blocks=*/2048);
  const Run spec = RunAll(make(kN + 1), {.proposer = "draft", .max_draft_tokens = 3}, config, 2048);
  ASSERT_GT(Drafted(spec.stats), kN);
  ASSERT_GT(Accepted(spec.stats), 0);
  ASSERT_LT(Accepted(spec.stats), Drafted(spec.stats)) << "the test needs rejections too";

  std::map<std::vector<model::TokenId>, std::pair<int, int>> counts;
  for (const auto& [id, t] : plain.tokens) ++counts[t].first;
  for (const auto& [id, t] : spec.tokens) ++counts[t].second;
  // Bins with an expected count under 5 are pooled.
  double chi2 = 0.0;
  int bins = 0, pooled_a = 0, pooled_b = 0;
  for (const auto& [seq, ab] : counts) {
    if (ab.first + ab.second < 10) {
      pooled_a += ab.first;
      pooled_b += ab.second;
      continue;
    }
    chi2 += std::pow(ab.first - ab.second, 2) / (ab.first + ab.second);
    ++bins;
  }
  if (pooled_a + pooled_b > 0) {
    chi2 += std::pow(pooled_a - pooled_b, 2) / (pooled_a + pooled_b);
    ++bins;
  }
  ASSERT_GE(bins, 5) << "too few distinct continuations for a meaningful test";
  EXPECT_LT(chi2, ChiSquareCritical(bins - 1)) << bins << " bins";
}

}  // namespace
}  // namespace kvfleet::engine
