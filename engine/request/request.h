// What a client submits to the engine, what it gets back, and the engine's
// per-request state.
//
//   EngineRequest r{.id = RequestId(7), .prompt = ids, .stopping = {.max_tokens = 64}};
//   RETURN_IF_ERROR(engine.Submit(std::move(r), &sink));
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/block_hash.h"
#include "common/ids.h"
#include "engine/request/acceptance_estimate.h"
#include "engine/request/finish_reason.h"
#include "engine/request/speculation_options.h"
#include "engine/sampler/logprobs.h"
#include "engine/sampler/sampler.h"
#include "engine/sampler/sampling_params.h"
#include "engine/sampler/token_constraint.h"
#include "model/token_id.h"

namespace kvfleet::model {
struct LoraAdapter;
}  // namespace kvfleet::model

namespace kvfleet::engine {

namespace spec {
class Proposer;
}

// A peer worker that holds a prompt's leading blocks (the router's hint):
// the engine copies them from it before prefilling, as from its own disk,
// and computes only the rest; a pull that fails just computes them.
struct KvPeerSource {
  std::string endpoint;  // the peer's transfer address
  int32_t blocks = 0;    // how many of the prompt's leading full blocks it holds
  std::string lease_id;  // the peer holds them under this lease (a split request's id); may be empty
};

struct EngineRequest {
  RequestId id;
  std::vector<model::TokenId> prompt;
  SamplingParams sampling;
  StoppingParams stopping;
  int32_t priority = 0;    // lower runs first; FIFO within a priority
  std::string cache_salt;  // separates tenants' prefix caches
  LogprobsParams logprobs;
  // Tokens this request already generated elsewhere (a failover resumes it
  // here): they follow the prompt, count as output for the penalties and
  // max_tokens, and are not streamed again. With greedy or seeded sampling
  // the continuation equals what the first worker would have produced.
  std::vector<model::TokenId> resumed_output;
  // Speculative decoding: the proposer ("" for the worker's default, "off")
  // and the most tokens to draft per step (0: the worker's).
  spec::SpeculationParams speculation;
  // Which tokens may come next (structured output, enforced tool calls);
  // null: any.
  std::shared_ptr<TokenConstraint> constraint;
  std::optional<KvPeerSource> kv_peer;
  // Disaggregated prefill: compute the prompt and sample the first token
  // only; unless that token ends the request it finishes with kHandoff and
  // the engine holds the prompt's blocks under the lease kv_lease_id
  // (EngineOptions::kv_lease_duration) for a decode worker's pull.
  bool prefill_only = false;
  std::string kv_lease_id;
  // The LoRA adapter it runs under (model/lora/); null: the base model. Its
  // identity roots the request's block hashes.
  std::shared_ptr<const model::LoraAdapter> lora;
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // of the prompt, served from the prefix cache at admission
  int32_t generated_tokens = 0;      // by this engine for this request (resumed output excluded)
};

// One delivery to a request's sink: new tokens, and at the end the reason.
struct RequestOutput {
  RequestId id;
  std::vector<model::TokenId> new_tokens;
  std::vector<TokenLogprobs> logprobs;  // one per new token, when asked for
  bool finished = false;
  FinishReason finish_reason = FinishReason::kLength;
  Usage usage;  // so far on every output; final on the finished one
  // On the final output: seconds from Submit to the first step that ran the
  // request; -1 when it never ran (cancelled while waiting).
  double queue_seconds = -1.0;
};

// Receives a request's outputs. Called on the engine thread: it must not
// block (hand the output to another thread or queue it).
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void OnOutput(RequestOutput output) = 0;
};

enum class RequestState { kWaiting, kRunning, kFinished };

// The engine's state for one request. Owned by the engine; the scheduler and
// the KV cache manager see it by pointer.
struct Request {
  Request(EngineRequest params, uint64_t seed, uint64_t arrival, OutputSink* sink)
      : params(std::move(params)),
        tokens(this->params.prompt),
        sampler(this->params.sampling, seed, this->params.prompt),
        seed(seed),
        arrival(arrival),
        sink(sink) {
    tokens.insert(tokens.end(), this->params.resumed_output.begin(), this->params.resumed_output.end());
    for (model::TokenId t : this->params.resumed_output) {
      sampler.Accept(t);
      // The constraint's state is rebuilt from the tokens (what a failover sends).
      if (this->params.constraint != nullptr) this->params.constraint->Accept(t);
    }
  }

  RequestId id() const { return params.id; }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_prompt_tokens() const { return static_cast<int32_t>(params.prompt.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens(); }
  // Tokens whose KV is still to be computed (the prompt's rest, or the last
  // sampled token).
  int32_t num_pending_tokens() const { return num_tokens() - num_computed_tokens; }

  EngineRequest params;
  std::vector<model::TokenId> tokens;  // prompt, then every sampled token
  Sampler sampler;
  uint64_t seed;
  uint64_t arrival;  // admission order; kept across preemption
  OutputSink* sink;

  RequestState state = RequestState::kWaiting;
  int32_t num_computed_tokens = 0;  // tokens whose KV is in the cache
  std::vector<BlockId> block_table;
  std::vector<BlockHash> block_hashes;  // of the full blocks committed so far
  // RootBlockHash(the engine's model id, the request's cache salt), set at
  // Submit: every hash of its blocks chains from it, and it keys what the
  // request may share with others (its tenant).
  BlockHash cache_root;
  // Of the prompt's full blocks, computed at Submit (HashFullBlocks from the
  // engine's model id and the request's cache salt, as the KV cache manager
  // chains them): what the load report's pending prefill compares between
  // requests (a shared prefix counts once), and what prefix lookups reuse.
  std::vector<BlockHash> prompt_block_hashes;
  // Its partial last prompt block counts in PendingPrefill (until its first token).
  bool pending_tail_counted = false;
  int32_t cached_prompt_tokens = -1;  // set at first admission
  std::chrono::steady_clock::time_point submitted_at = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> first_scheduled_at;
  int32_t num_preemptions = 0;
  bool cancel_requested = false;
  // Lower KV tiers: its prefix is being read back from disk (it waits, the
  // engine steps others); one such load per admission (preemption resets it).
  bool kv_loading = false;
  bool kv_load_tried = false;
  // Its prefix continues on disk but another request's load runs: it waits
  // its turn rather than recompute (set by each prefix lookup).
  bool kv_awaits_disk = false;
  // Its kv_peer's pull has been started (once: at its first admission try,
  // so blocks pulled for a request deep in the queue are not evicted before
  // it runs).
  bool kv_peer_tried = false;
  // The pages its peer pull is bringing, while it travels (not pending
  // prefill meanwhile: PendingPrefill::Arriving).
  std::vector<BlockHash> kv_pulling;
  // Requests admitted ahead of it while it did not fit (Scheduler's bounded
  // bypass); reset when it is admitted.
  int32_t admissions_bypassed = 0;
  // Its LoRA adapter's identity (LoraAdapter::identity(), set at Submit;
  // empty for the base model): part of its cache root.
  std::string lora_identity;
  // The executor's slot holding its LoRA adapter while it runs (pinned
  // there by the scheduler's run gate); -1: none held.
  int32_t lora_slot = -1;

  // Speculative decoding (see Speculator).
  spec::Proposer* proposer = nullptr;  // null: this request never speculates (unless auto_proposer)
  // The Speculator picks this step's proposer (the "auto" policy); `proposer`
  // then names the one it picked last.
  bool auto_proposer = false;
  int32_t max_draft_tokens = 0;
  // This step's guesses for the tokens after `tokens`: scheduled after the
  // pending token in the same chunk, verified by the step's forward pass,
  // cleared by the next plan.
  std::vector<model::TokenId> draft;
  // Empty for a chain; for a tree, draft[i]'s parent: -1 for the pending
  // token, else an earlier guess (spec::DraftSlot::parents).
  std::vector<int32_t> draft_parents;
  // The proposer's estimate that each guess is kept (spec::DraftSlot::worths); may be empty.
  std::vector<double> draft_worths;
  int32_t draft_evidence = 0;  // the proposer's DraftSlot::evidence for `draft`
  // The target's hidden state at the row that sampled the last token, kept
  // only when the proposer needs_hidden_state() (draft heads).
  std::vector<float> last_hidden;
  spec::AcceptanceEstimate acceptance;
  int32_t steps_since_draft = 0;

  // Keeps the first n guesses: a tree's first n nodes are a tree too (a
  // parent comes before its children).
  void TruncateDraft(size_t n) {
    if (draft.size() <= n) return;
    draft.resize(n);
    if (!draft_parents.empty()) draft_parents.resize(n);
    if (!draft_worths.empty()) draft_worths.resize(n);
    if (n == 0) draft_evidence = 0;
  }
  void ClearDraft() {
    TruncateDraft(0);
    draft_evidence = 0;
  }
};

}  // namespace kvfleet::engine
