// The fixture the speculative-decoding engine suites share: test
// proposers (random guesses; oracle trees that hide plain decoding's token
// among decoys), an executor that cannot move KV, and RunAll, which runs
// requests to completion with every proposer loaded and audits the block
// accounting after every step. Compiled into the CPU, CUDA-emulation and
// GPU binaries alike.
#ifndef KVFLEET_TESTS_UNIT_ENGINE_SPECULATIVE_ENGINE_FIXTURE_H_
#define KVFLEET_TESTS_UNIT_ENGINE_SPECULATIVE_ENGINE_FIXTURE_H_

#include <gtest/gtest.h>

#include <map>
#include <random>

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
#include "tests/unit/engine/tiny_model_suite.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {

inline constexpr int32_t kBlockSize = 4;
inline constexpr int32_t kVocab = 280;

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
  absl::Status LoadDraftHeads(std::shared_ptr<const model::DraftHeads> heads) override {
    return inner_->LoadDraftHeads(std::move(heads));
  }
  absl::StatusOr<std::span<const float>> RunDraftHeads(std::span<const float> hidden, int64_t rows,
                                                       int32_t num_heads) override {
    return inner_->RunDraftHeads(hidden, rows, num_heads);
  }

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

class SpeculativeEngineTest : public TinyModelSuite {
 protected:
  static void SetUpTestSuite() {
    LoadTinyModel({.dtype = DType::kQ8_0, .seed = 21});
    // Untrained heads repeat the target's own next guess: some are right.
    kvfleet::testing::WriteDraftHeads(*model_, dir_->Path("heads"), {.num_heads = 3, .scale = 0.02f});
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
    std::unique_ptr<spec::HeadsProposer> heads = *spec::HeadsProposer::Create(
        *model::DraftHeads::Load(dir_->Path("heads"), *model_, "t.gguf", model::ModelFingerprint(*model_)), *executor,
        setup.heads_top_k);
    RandomProposer random;
    TreeProposer tree(setup.answers);
    kvfleet::testing::RecordingKvListener listener;
    EngineOptions options{.model_id = "tiny", .scheduler = config};
    options.proposers = {&ngram, &suffix, &self, draft.get(), heads.get(), &random, &tree};
    options.speculation = {
        .proposer = setup.proposer, .max_draft_tokens = setup.max_draft_tokens, .adaptive = setup.adaptive};
    EXPECT_TRUE(options.Validate().ok()) << options.Validate();
    Engine engine(*executor, options, &listener);
    std::map<uint64_t, kvfleet::testing::CollectingSink> sinks;
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
      for (int j = 0; j < 3 + static_cast<int>(rng() % 5); ++j)
        motif.push_back(static_cast<model::TokenId>(rng() % kVocab));
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
};

// Each request's whole text after plain decoding: what the tree proposer
// hides among its decoys.
inline std::map<uint64_t, std::vector<model::TokenId>> Answers(
    const std::vector<EngineRequest>& requests, const std::map<uint64_t, std::vector<model::TokenId>>& outputs) {
  std::map<uint64_t, std::vector<model::TokenId>> answers;
  for (const EngineRequest& r : requests) {
    std::vector<model::TokenId>& a = answers[r.id.value()];
    a = r.prompt;
    a.insert(a.end(), outputs.at(r.id.value()).begin(), outputs.at(r.id.value()).end());
  }
  return answers;
}

}  // namespace kvfleet::engine

#endif  // KVFLEET_TESTS_UNIT_ENGINE_SPECULATIVE_ENGINE_FIXTURE_H_
