// Speculative decoding's proposers: something cheap that guesses the next
// few tokens of a sequence, for the target model to check all at once in
// one forward pass (docs/design.md, Scheduling; engine/README.md,
// "Speculative decoding"). A proposer only guesses: verification against
// the target's own sampling decides what is kept, so a bad guess costs
// time, never correctness.
//
// Implementations: NgramProposer (prompt lookup, no model), SuffixProposer
// (the request's own text and earlier outputs, no model), HeadsProposer
// (small trained heads on the target's own hidden state),
// SelfSpeculativeProposer (the target's first layers and its output head),
// DraftModelProposer (a second, smaller model with its own paged KV).
//
// Proposals are made for a whole batch at once, so model-based proposers
// run one batched forward pass per draft position instead of one per
// request.
//
// Thread-safety: a proposer is used by the engine thread only.
//
//   std::vector<DraftSlot> slots = {{.id = id, .context = tokens, .num_computed = n - 1, .max_tokens = 4}};
//   RETURN_IF_ERROR(proposer.Propose(slots));   // slots[0].draft may stay empty
#pragma once

#include <climits>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/block_hash.h"
#include "common/ids.h"
#include "model/token_id.h"

namespace kvfleet::engine::spec {

// One request's part of a proposal round.
struct DraftSlot {
  RequestId id;
  // The request's tenant: its cache root (RootBlockHash of the model and
  // its cache salt). A proposer that learns across requests proposes from
  // this tenant's outputs only.
  BlockHash tenant;
  // The request's prompt and output so far. KV is computed for the first
  // num_computed tokens in the target's cache; the rest (normally the last
  // token alone) is pending.
  std::span<const model::TokenId> context;
  int32_t num_computed = 0;
  // The target's block table; it covers context.size() + max_tokens - 1
  // positions when the proposer uses_target_kv().
  std::span<const BlockId> block_table;
  // The target's LoRA slot the request runs under (-1: the base model): a
  // proposer that runs the target's own layers runs them under it too.
  int32_t lora_slot = -1;
  int32_t max_tokens = 0;
  // The target's hidden state (its output head's input) at the row that
  // sampled the pending token, when the proposer needs_hidden_state();
  // empty when the engine has none (an executor that does not export it).
  std::span<const float> hidden;
  std::vector<model::TokenId> draft;  // out: at most max_tokens guesses, possibly none
  // out, optional: a tree of guesses. parents[i] is draft[i]'s parent, -1
  // for the pending token, else an earlier guess's index; empty means a
  // chain (each guess follows the one before). The target verifies the
  // whole tree in one pass and keeps the longest path its own sampling
  // follows. Best first: the first n guesses of a draft must be a tree.
  std::vector<int32_t> parents;
  // out, optional: for each guess, the proposer's estimate that it is kept
  // (its whole path accepted), non-increasing. With them the engine sizes
  // the draft guess by guess, instead of from the request's acceptance rate.
  std::vector<double> worths;
  int32_t rows_computed = 0;  // out: tokens a proposer model ran for this slot (catch-up included)
  // out: how strong the draft's evidence is, for a lookup proposer the
  // length of the match it copied from (0: not reported). The engine learns
  // acceptance per evidence level across requests, so a long match earns a
  // long draft and a two-token match a short one.
  int32_t evidence = 0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  // A label for configuration, metrics and logs: "ngram", "suffix", "self",
  // "draft".
  virtual std::string_view name() const = 0;

  // Fills every slot's draft with at most max_tokens guesses for the tokens
  // that follow its context. An empty draft means "no useful guess": that
  // request decodes as usual. Errors are a proposer model's failures; the
  // step then runs without drafts.
  virtual absl::Status Propose(std::span<DraftSlot> slots) = 0;

  // What running one token through the proposer costs next to one through
  // the target (0 for a lookup, L/N for the target's first L layers), before
  // any measurement: the adaptive draft length starts from it. A proposer
  // of cost 0 is asked for its longest draft first, and the engine then
  // keeps as much of it as pays (its evidence known).
  virtual double relative_cost() const { return 0.0; }

  // Tokens of `context` the proposer would have to run before its first
  // guess for this request (a draft model's catch-up on its own cache).
  virtual int64_t RowsBehind(RequestId /*id*/, std::span<const model::TokenId> /*context*/) const { return 0; }

  // The request finished: drop whatever the proposer kept for it.
  virtual void Forget(RequestId /*id*/) {}

  // The longest draft the proposer can make (draft heads: one per head).
  virtual int32_t max_draft_tokens() const { return INT32_MAX; }

  // True when drafting costs the same however much of the draft is kept (a
  // lookup; draft heads, which score every head at once): the engine asks
  // for the longest draft first and then keeps as much as pays, knowing
  // its evidence or its guesses' worths.
  virtual bool drafts_before_sizing() const { return relative_cost() == 0.0; }

  // True when drafting starts from the target's last hidden state (draft
  // heads): the engine keeps each request's, and passes it in DraftSlot.
  virtual bool needs_hidden_state() const { return false; }

  // Host memory the proposer keeps across requests (a draft model's weights
  // and cache are planned with the target's and not counted here).
  virtual int64_t MemoryBytes() const { return 0; }

  // A request of `tenant` (DraftSlot::tenant) finished, whichever proposer
  // it used or none, with this output: a proposer that learns from earlier
  // outputs keeps it, for that tenant's later requests only.
  virtual void Learn(const BlockHash& /*tenant*/, std::span<const model::TokenId> /*output*/) {}

  // True when proposing writes the target's KV cache (layers it shares with
  // the target) at positions [num_computed, context.size() + max_tokens - 1):
  // the engine allocates those blocks first. The verify pass rewrites the
  // same positions with identical values, so nothing stale survives.
  virtual bool uses_target_kv() const { return false; }
};

}  // namespace kvfleet::engine::spec
