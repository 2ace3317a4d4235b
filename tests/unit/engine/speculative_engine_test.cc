// Speculative decoding in the engine: with every proposer, drafting and
// verification change no token (greedy and seeded), inside mixed batches,
// under small token budgets and preemption; sampling keeps the model's
// distribution; rejected guesses leave no block behind and no hash
// published; the per-request opt-out and the validation of choices.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "common/block_hash.h"
#include "tests/unit/engine/speculative_engine_fixture.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::CollectingSink;

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
// what an earlier one of its tenant wrote drafts it from the store, and
// every guess is right, while its tokens stay plain decoding's. A request
// of another tenant (another cache salt) drafts exactly as the first did
// from an empty store: one tenant's outputs never shape another's drafts.
TEST_F(SpeculativeEngineTest, SuffixDraftsFromEarlierOutputsOfItsTenantOnly) {
  for (const bool same_tenant : {true, false}) {
    SCOPED_TRACE(same_tenant ? "same tenant" : "another tenant");
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
      r.cache_salt = same_tenant || id == 1 ? "tenant-a" : "tenant-b";
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
    EXPECT_EQ(suffix.store()->num_tenants(), same_tenant ? 1 : 2);
    const int64_t drafted = after[1].drafted_tokens - after[0].drafted_tokens;
    const int64_t accepted = after[1].accepted_tokens - after[0].accepted_tokens;
    const auto first = std::pair(after[0].drafted_tokens, after[0].accepted_tokens);
    if (same_tenant) {
      EXPECT_GT(drafted, 20);
      EXPECT_EQ(accepted, drafted);
      EXPECT_NE(std::pair(drafted, accepted), first);  // the store changed what was drafted
    } else {
      EXPECT_EQ(std::pair(drafted, accepted), first);
    }
  }
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
