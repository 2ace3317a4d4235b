// The worker's engine: continuous batching over a paged KV cache.
//
// Owns every request, the block pool, the KV cache manager and the
// scheduler; drives a ModelExecutor. All of that state belongs to one engine
// thread and takes no locks. Other threads talk to it only through the
// inbox (Submit, Cancel) and read Stats() snapshots; outputs leave through
// each request's OutputSink.
//
// One step: take the inbox, draft for decoding requests (speculative
// decoding, when a proposer is loaded), schedule (decode tokens, drafts and
// prefill chunks under one token budget), run one forward pass for the whole
// batch, sample a token for every request that reached the end of its known
// tokens and verify its draft, publish full blocks to the prefix cache,
// stream outputs, and free the blocks of finished requests.
//
// Step() can be called directly (tests drive the engine synchronously);
// Start() runs steps on the engine's own thread until Stop().
//
//   Engine engine(executor, {.model_id = "SmolLM2"});
//   RETURN_IF_ERROR(engine.Submit(std::move(request), &sink));
//   while (engine.HasWork()) RETURN_IF_ERROR(engine.Step());
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "engine/engine_stats.h"
#include "engine/executor/model_executor.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/kv/tiers/kv_tier_manager.h"
#include "engine/kv/transfer/kv_block_stream.h"
#include "engine/kv/transfer/kv_peer_fetcher.h"
#include "engine/lora/lora_residency.h"
#include "engine/pending_prefill.h"
#include "engine/request/request.h"
#include "engine/request/speculation_options.h"
#include "engine/sampler/mask_prefetcher.h"
#include "engine/scheduler/scheduler.h"
#include "engine/spec/proposer.h"
#include "engine/speculator.h"
#include "engine/step_observer.h"

namespace kvfleet::engine {

struct EngineOptions {
  std::string model_id;           // roots the block hashes, with the fingerprint
  std::string model_fingerprint;  // the weights' (model/model_fingerprint.h); empty: none known
  SchedulerConfig scheduler;
  bool enable_prefix_caching = true;
  std::vector<model::TokenId> end_of_turn_tokens;  // the model's own stop tokens
  // Submit refuses (RESOURCE_EXHAUSTED) while this many requests wait for a
  // running slot; 0: unbounded.
  int32_t max_waiting_requests = 0;
  StepObserver* step_observer = nullptr;  // may be null; must outlive the engine
  // Speculative decoding: the loaded proposers (must outlive the engine;
  // none: no speculation) and the worker's defaults.
  std::vector<spec::Proposer*> proposers;
  spec::SpeculationOptions speculation;
  // Host-memory and disk tiers below the device cache (may be null; must
  // outlive the engine). Made over the same executor with the engine's
  // listener as its next: the engine puts it between the pool and that
  // listener.
  KvTierManager* kv_tiers = nullptr;
  // Copies a request's prefix from the peer its kv_peer names (may be
  // null: never pulled; must outlive the engine, whose destructor waits for
  // the pulls in flight).
  KvPeerFetcher* kv_peer_fetcher = nullptr;
  // How long a prefill_only request's blocks wait for the pull that names
  // their lease before they become ordinary cache; leases hold at most
  // half the pool (kv/kv_leases.h).
  std::chrono::milliseconds kv_lease_duration{30000};
  // A handed-off prompt's blocks are copied out at the handoff, up to this
  // many bytes staged in all (0: never), so that the decode worker's pull
  // is answered at once rather than after the step in progress, which on a
  // busy prefill worker is a long prefill chunk.
  int64_t kv_lease_staging_bytes = int64_t{256} << 20;
  // Called once, on the engine thread, when a step fails and the executor
  // says it can run no step again (ModelExecutor::Fault: a tensor-parallel
  // rank failed). The worker exits; may be empty.
  std::function<void(const absl::Status&)> on_executor_fault;

  absl::Status Validate() const;
  // The batch limits an executor must take for this engine: the scheduler's
  // token and sequence budgets, and a logits row per chunk plus one per
  // drafted token.
  ExecutorLimits ExecutorLimitsNeeded() const;
  static ExecutorLimits ExecutorLimitsFor(const SchedulerConfig& scheduler, int32_t max_draft_tokens);
};

// Liveness of the engine loop, for a watchdog: the loop is stalled when
// requests are in flight and it has made no progress for a while.
struct EngineHeartbeat {
  int64_t in_flight = 0;                                // submitted, not yet finished
  std::chrono::steady_clock::time_point last_progress;  // last step end, or wake from idle
};

class Engine {
 public:
  // The executor's cache geometry sizes the block pool; its limits must hold
  // options.ExecutorLimitsNeeded(). `listener` (may be null) receives KV
  // events on the engine thread; both must outlive the engine.
  Engine(ModelExecutor& executor, const EngineOptions& options, KvEventListener* listener = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. INVALID_ARGUMENT for a request that is malformed or can never
  // fit (prompt + max_tokens over the context or over the whole pool);
  // RESOURCE_EXHAUSTED when max_waiting_requests are already waiting. The
  // sink must outlive the request (until it receives finished = true).
  absl::Status Submit(EngineRequest request, OutputSink* sink);
  // Thread-safe. The request finishes with kCancelled at the next step and its
  // blocks are freed; unknown or finished ids are ignored.
  void Cancel(RequestId id);
  // Thread-safe. At the next step (even when idle) the engine thread calls
  // the KV event listener's OnSnapshot with every cached block.
  void RequestKvSnapshot();
  // Thread-safe. At the next step (even when idle) the adapters of this
  // name leave the executor's slots; one a running request uses leaves when
  // the last such request stops (an unloaded adapter's memory goes back).
  void EvictLora(const std::string& name);
  // Thread-safe: a peer's pull (engine/kv/transfer). At the next step (even
  // when idle) the engine thread copies out the blocks of `hashes`, in
  // order, from the device or host memory (the executor's own bytes),
  // stopping at the first it holds in neither, then calls `done` with them
  // on the engine thread: `done` must only hand them to another thread.
  // A pull naming `lease_id` ends that lease once served (the blocks stay
  // cached); one that arrives before the lease's deadline finds its blocks,
  // as exports are served before leases expire. A lease's staged copy
  // answers on the calling thread, without waiting for a step.
  using KvExportDone = std::function<void(std::vector<KvBlockBytes>)>;
  void ExportKvBlocks(std::vector<BlockHash> hashes, KvExportDone done, std::string lease_id = "");
  // A reader still waiting for lease `lease_id`: its deadline moves to
  // kv_lease_duration from the next step (any thread; an ended lease is
  // not taken again). The decode side sends these for a split request
  // that queues before its pull (RenewQueuedHandoffLeases).
  void RenewKvLease(std::string lease_id);

  // One scheduling step on the calling thread. Errors are the executor's.
  absl::Status Step();
  // Requests queued, waiting or running (engine thread, or when stopped).
  bool HasWork() const;

  // Runs steps on the engine's own thread until Stop(). Requests still in
  // flight at Stop() get no final output: stop only once they are done (or
  // their sinks no longer care), as the worker does after draining.
  void Start();
  void Stop();

  // Thread-safe snapshot, updated after every step and on every Submit (the
  // inbox counts as waiting, with its pending prefill).
  EngineStats Stats() const;
  // Thread-safe.
  EngineHeartbeat Heartbeat() const;

  const EngineOptions& options() const { return options_; }

  // Audits the block accounting (engine thread, between steps): the pool's
  // counters equal a fresh recount; every block's reference count equals the
  // number of requests whose block table names it, plus the disk loads in
  // flight that fill it; no request holds a block
  // past its tokens. INTERNAL naming the first mismatch. For tests.
  absl::Status AuditBlocks() const;

 private:
  struct Inbox {
    std::vector<std::unique_ptr<Request>> submitted;
    std::vector<RequestId> cancelled;
    bool snapshot = false;
    struct Export {
      std::vector<BlockHash> hashes;
      KvExportDone done;
      std::string lease_id;
    };
    std::vector<Export> exports;
    struct Pulled {
      RequestId id;
      int64_t asked = 0;
      std::vector<KvBlockBytes> blocks;
      absl::Status status;
      std::chrono::steady_clock::time_point started;
    };
    std::vector<Pulled> pulled;
    // Pulls a lease's staged copy answered: their lease ends and they count.
    struct StagedServed {
      std::string lease_id;
      int64_t blocks = 0;
      int64_t bytes = 0;
    };
    std::vector<StagedServed> staged_served;
    std::vector<std::string> renewals;        // RenewKvLease
    std::vector<std::string> lora_evictions;  // EvictLora
    bool empty() const {
      return submitted.empty() && cancelled.empty() && !snapshot && exports.empty() && pulled.empty() &&
             staged_served.empty() && renewals.empty() && lora_evictions.empty();
    }
  };

  absl::Status Validate(const EngineRequest& request) const;
  void DrainInbox();
  // One peer pull's blocks, copied out (engine thread).
  // A peer's pull: the leading blocks held on the device or in host memory
  // copied now, then a run only the disk holds read in the background;
  // `done` gets them all (at a later step when the disk is read).
  void ServeExport(const std::vector<BlockHash>& hashes, KvExportDone done, const std::string& lease_id);
  // A prefill_only request that handed off: its prompt's pages (the window
  // pages its end reaches too) held under its lease.
  void HoldForHandoff(const Request& req);
  // The staged copy of lease `lease_id`'s blocks that `hashes` asks for, in
  // order up to the first it lacks; nullopt when none is staged (any
  // thread; the lease's copy is used once).
  std::optional<std::vector<KvBlockBytes>> TakeStaged(const std::string& lease_id,
                                                      const std::vector<BlockHash>& hashes);
  // Drops staged copies whose lease ended (engine thread).
  void DropStagedWithoutLease();
  std::vector<KvBlockBytes> CopyOutForPeer(const std::vector<BlockHash>& hashes);
  void CountServed(const std::vector<KvBlockBytes>& blocks);
  // A request's pull from its kv_peer, at its first admission try (the
  // KvCacheManager's hook), when the peer holds pages of its prefix this
  // worker lacks: true, and the request waits (kv_loading) meanwhile.
  bool StartPeerPull(Request& req);
  // A split request's pull, started in Submit (when a running slot is free and nothing waits)
  // rather than at its admission after the step in progress: the prefill
  // worker holds the blocks under a lease and the client waits on this
  // pull for its first token. Asks for every page of the hit (which ones
  // this worker holds is the engine thread's to know; the commit skips
  // them). Marks the request loading and counts the pull; the caller
  // fetches the returned pages once the request is in the inbox. Empty:
  // not a split request, or nothing to pull. (Behind a queue, a pull
  // waits for admission, so that eviction does not take what it brought:
  // in the placement simulator at 16 workers, 0.9 load, pulling behind a
  // queue cut throughput by a tenth.)
  std::vector<BlockHash> ClaimPullAtArrival(Request& req) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The pages a pull from the request's kv_peer would bring: its hit's
  // blocks short of the prompt's last token, with the window pages their
  // end reaches (any thread: reads no pool state).
  std::vector<BlockHash> PeerHitPages(const Request& req) const;
  // Asks the transport for `wanted` from `peer`; the blocks reach the inbox
  // (any thread; the caller counted the pull in pulls_in_flight_).
  void FetchFromPeer(RequestId id, const KvPeerSource& peer, const std::string& adapter, std::vector<BlockHash> wanted);
  // Renews the leases of queued split requests that are due (engine
  // thread, each step); forgets those whose pull started or that ended.
  void RenewQueuedHandoffLeases(std::chrono::steady_clock::time_point now);
  // A pull's blocks into free device blocks, committed under their hashes
  // and left cached for the request's admission; then it may run.
  void FinishPeerPull(Inbox::Pulled& pulled);
  // Whether this worker holds a block in any tier.
  bool HeldHere(const BlockHash& hash) const;
  // The step's chunks as the executor's flat batch (in batch_builder_).
  const ForwardBatch& BuildForwardBatch(const SchedulerOutput& scheduled);
  // Frees the request's blocks, sends its final output (with last_tokens,
  // if any) and destroys it.
  void Finish(Request& req, FinishReason reason, std::vector<model::TokenId> last_tokens = {},
              std::vector<TokenLogprobs> last_logprobs = {});
  // Samples (and verifies drafts), streams and retires after a forward pass.
  void ProcessOutputs(const SchedulerOutput& scheduled, const ForwardBatch& batch, const ForwardOutput& forward);
  // Samples the tokens that follow a chunk that reached the end of the
  // request's tokens, from its logits rows: one token, or, with a draft,
  // each drafted token's own sample until one differs from the guess (that
  // sample is kept instead) or all agree (and one more follows).
  void EmitTokens(Request& req, const ScheduledChunk& chunk, const ForwardOutput& forward, int64_t first_row);
  // After a tree verification: moves the KV of the kept guesses (`path`,
  // guess indices in order) to where plain decoding would have written
  // them. Returns how many of them now count as computed.
  int32_t KeepPathKv(const Request& req, const std::vector<int32_t>& path);
  // Keeps the hidden state of `row` (the one that sampled req's last token)
  // when its proposer drafts from it.
  void KeepHiddenState(Request& req, const ForwardOutput& forward, int64_t row);
  bool IsStopToken(const Request& req, model::TokenId token) const;
  static Usage UsageSoFar(const Request& req);
  void PublishStats(int64_t last_step_tokens);
  void ObservePrefillRate(const SchedulerOutput& scheduled, double seconds);
  // Starts computing the next-token mask of each constrained request this
  // step samples for (all of them before sampling: see MaskPrefetcher).
  void PrefetchMasks(const SchedulerOutput& scheduled);
  void ReportStep(const SchedulerOutput& scheduled, std::chrono::steady_clock::time_point start) const;
  void Loop();

  ModelExecutor& executor_;
  EngineOptions options_;
  KvEventListener* listener_;
  PendingPrefill pending_prefill_;  // the pool's listener; forwards to listener_
  BlockPool pool_;
  KvCacheManager kv_;
  // Which LoRA adapters the executor's slots hold (null: it has none); the
  // scheduler's run gate, so declared before it.
  std::unique_ptr<LoraResidency> lora_;
  Scheduler scheduler_;
  Speculator speculator_;
  MaskPrefetcher mask_prefetcher_;             // constrained requests' masks, during the forward pass
  ForwardBatchBuilder batch_builder_;          // reused: no allocation per step once warm
  std::vector<model::TokenId> verify_tokens_;  // a drafted chunk's tokens: pending token, then guesses
  std::vector<int32_t> verify_parents_;        // a tree chunk's node parents (ForwardBatchBuilder::AddChunk)
  std::vector<int64_t> move_from_, move_to_;   // an accepted tree path's KV moves
  bool warned_no_kv_move_ = false;
  absl::flat_hash_map<RequestId, std::unique_ptr<Request>> requests_;  // engine thread only
  uint64_t next_arrival_ = 0;
  int64_t steps_ = 0;
  bool last_step_empty_ = false;          // nothing was scheduled (all waiting, some on disk loads)
  bool executor_fault_reported_ = false;  // on_executor_fault was called
  double prefill_tokens_per_second_ = 0.0;
  double mask_wait_seconds_ = 0.0;
  KvPeerStats kv_peer_stats_;  // engine thread; published with the step's stats
  KvLeases kv_leases_;         // engine thread
  // Split requests queued here before their pull, and when each next asks
  // its prefill worker to keep the lease (a third of kv_lease_duration
  // apart): engine thread.
  absl::flat_hash_map<RequestId, std::chrono::steady_clock::time_point> queued_handoffs_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  Inbox inbox_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<RequestId> active_ids_ ABSL_GUARDED_BY(mu_);  // submitted, not yet finished
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  // Prompt block hashes of every submitted, unfinished request, counted:
  // what a request arriving in the inbox is compared against.
  absl::flat_hash_map<BlockHash, int32_t> active_prompt_blocks_ ABSL_GUARDED_BY(mu_);
  int64_t inbox_pending_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  // Taken from the inbox by this step but not yet in stats_ (a step can take
  // seconds): still counted by Stats() until the step publishes.
  int32_t drained_requests_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t drained_pending_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point last_progress_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Handed-off prompts' blocks copied out, by lease id, and their bytes.
  absl::flat_hash_map<std::string, std::vector<KvBlockBytes>> staged_ ABSL_GUARDED_BY(mu_);
  int64_t staged_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Peer pulls whose `done` has not come back: the destructor waits for it.
  int32_t pulls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace kvfleet::engine
