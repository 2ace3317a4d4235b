// Suffix decoding (SuffixDecoding, ArcticInference's "suffix" method): a
// model-free proposer that matches the end of the request's text against
// two sources and proposes what followed the match, as long as the match
// and the evidence justify.
//
//   - The request's own text (prompt and output so far): every earlier
//     position where the longest suffix (up to max_depth tokens) recurs.
//     Among those occurrences, each next token is the most frequent one
//     that continues the draft so far (ties: the most recent), and its
//     probability is its share of the occurrences still agreeing.
//   - A store of earlier requests' outputs (SuffixStore): the longest suffix
//     found there, and its most frequent continuations by count. Only the
//     request's own tenant's outputs (DraftSlot::tenant): what one tenant
//     wrote is never drafted for another.
//
// A draft stops where the running product of probabilities falls below
// min_token_prob, and is at most max_spec_factor × the match length long
// (a two-token match earns a short guess, a twenty-token match a long one).
// Each source's draft scores the sum of its running probabilities (its
// expected accepted tokens); the higher wins, the request's own text on a
// tie. A match shorter than min_match proposes nothing.
//
// It subsumes prompt lookup (NgramProposer): the own-text source finds every
// n-gram match that one does, preferring the longest, and a single
// occurrence proposes the same tokens. The store adds agentic and
// templated workloads, where one request repeats what another wrote.
//
// Memory: the store's bound (store_bytes, SuffixStore::BytesPerNode() per
// node); nothing per request. Cost per proposal: one scan of the request's
// text (O(length), like prompt lookup) and O(max_depth log max_depth) store
// lookups; adding a finished output is O(length × max_depth).
//
// Thread-safety: engine thread only.
//
//   SuffixProposer suffix({});
//   suffix.Learn(tenant, finished_output);
//   suffix.ProposeFor(tenant, context, 8, &draft);
#pragma once

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "engine/spec/proposer.h"
#include "engine/spec/suffix_store.h"

namespace kvfleet::engine::spec {

struct SuffixProposerOptions {
  int32_t max_depth = 24;                   // longest match used, and the store's substring length
  int32_t min_match = 2;                    // shorter matches guess too often wrong
  double max_spec_factor = 2.0;             // draft length <= factor × match length
  double min_token_prob = 0.1;              // stop drafting below this estimated probability
  int64_t store_bytes = int64_t{64} << 20;  // the store of finished outputs; 0: none

  // INVALID_ARGUMENT for values outside 2 <= max_depth <= 64,
  // 1 <= min_match < max_depth, factor > 0, 0 <= prob < 1, store_bytes >= 0.
  absl::Status Validate() const;
};

class SuffixProposer final : public Proposer {
 public:
  // CHECK-fails unless options.Validate() is OK.
  explicit SuffixProposer(SuffixProposerOptions options);

  std::string_view name() const override { return "suffix"; }
  absl::Status Propose(std::span<DraftSlot> slots) override;
  void Learn(const BlockHash& tenant, std::span<const model::TokenId> output) override;
  int64_t MemoryBytes() const override { return store_ ? store_->AllocatedBytes() : 0; }

  // Where a draft came from, for the policy and for benchmarks.
  struct Explained {
    int32_t match_length = 0;         // of the winning source's match (0: no draft)
    bool from_store = false;          // the store's draft won
    std::vector<double> probability;  // per drafted token: the running estimate that all so far are right
  };

  // The proposal for one context of `tenant`: replaces `*draft` with at
  // most `max_tokens` tokens (none when nothing matches well enough), and
  // fills `*explained` when given.
  void ProposeFor(const BlockHash& tenant, std::span<const model::TokenId> context, int32_t max_tokens,
                  std::vector<model::TokenId>* draft, Explained* explained = nullptr) const;

  // The store of finished outputs; null when store_bytes is 0.
  const SuffixStore* store() const { return store_ ? &*store_ : nullptr; }

 private:
  struct Candidate {
    std::vector<model::TokenId> tokens;
    std::vector<double> probability;  // running, per token
    double score = 0.0;               // expected accepted tokens: the sum of `probability`
    int32_t match_length = 0;
  };
  int32_t DraftCap(int32_t match_length, int32_t max_tokens) const;
  Candidate FromOwnText(std::span<const model::TokenId> context, int32_t max_tokens) const;
  Candidate FromStore(const BlockHash& tenant, std::span<const model::TokenId> context, int32_t max_tokens) const;

  const SuffixProposerOptions options_;
  std::optional<SuffixStore> store_;
};

}  // namespace kvfleet::engine::spec
