// Iteration-level scheduling (continuous batching). Each step fills one
// token budget with, in order:
//   1. running requests, oldest first: a decode token each, or the next
//      chunk of a prompt still being prefilled;
//   2. waiting requests, by priority then arrival: the cached prefix is
//      reused, the rest prefilled in chunks that fit the budget, while each
//      running request keeps growth_reserve_blocks free blocks to grow into.
//      A request that does not fit lets later requests of its priority that
//      do fit (a resident prefix needs few new blocks) go ahead, at most
//      admission_bypass_limit of them in all; then nothing passes it until
//      it is admitted, so it cannot starve.
// There are no prefill and decode phases: every request's computed tokens
// simply catch up with its known tokens.
//
// A running request's draft (speculative decoding) rides after its decode
// token in the same chunk when budget and free blocks allow; a draft is cut
// to fit the budget and dropped rather than ever causing a preemption.
//
// When the pool has no block for a running request, the newest running
// request is preempted by recompute: its blocks are freed and it returns to
// the front of the waiting queue with its tokens so far (greedy and seeded
// outputs are unchanged, since sampling depends only on seed and position).
//
// static_batching (benchmark baseline only): waiting requests are admitted
// only when nothing runs, and a batch runs until all of it has finished.
//
// Thread-safety: none; the engine thread owns it.
//
//   Scheduler s(config, kv);
//   s.Add(&req);
//   SchedulerOutput out = s.Schedule();
#pragma once

#include <cstdint>
#include <list>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "engine/executor/executor_options.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/request/request.h"

namespace kvfleet::engine {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 512;  // tokens computed per step, all requests together
  int32_t max_num_seqs = 64;             // requests running at once
  bool static_batching = false;
  // Free blocks kept per running request when admitting a new one (0: admit
  // while any block is free).
  int32_t growth_reserve_blocks = 1;
  // Admissions that may pass a waiting request that does not fit (0: strict
  // priority-then-arrival order, a head that does not fit blocks the rest).
  int32_t admission_bypass_limit = 16;

  absl::Status Validate() const;
  // A GPU step is far cheaper per token than a CPU step: it admits many more
  // sequences and batched tokens (CPU 64 and 512, GPU 256 and 8192).
  static SchedulerConfig DefaultsFor(DeviceKind device);
};

// What a request needs besides KV blocks to run, held from admission until
// it stops running (preempted, finished): its LoRA adapter resident in one
// of the executor's slots (engine/lora/lora_residency.h).
class RunGate {
 public:
  enum class Verdict {
    kAdmit,  // held: admit it
    kWait,   // not now (every slot is busy): the others go ahead
    kFail,   // never (the adapter cannot be loaded): the engine finishes it with an error
  };
  virtual ~RunGate() = default;
  virtual Verdict Acquire(Request& req) = 0;
  // Idempotent: nothing for a request that holds nothing.
  virtual void Release(Request& req) = 0;
};

struct ScheduledChunk {
  Request* request;
  int32_t num_tokens;  // computed this step, from request->num_computed_tokens on
  // Of num_tokens, the last ones are the request's draft (speculative
  // decoding): they follow its pending token, to be verified.
  int32_t num_draft_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  std::vector<Request*> preempted;
  // Waiting requests the run gate refused for good (out of the queue).
  std::vector<Request*> failed;
  int32_t num_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  // `gate` (may be null: nothing else needed) must outlive the scheduler.
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv, RunGate* gate = nullptr);

  // Queues a request (state kWaiting, no blocks).
  void Add(Request* req);
  // Removes a request wherever it is and frees its blocks.
  void Remove(Request* req);

  SchedulerOutput Schedule();

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const std::list<Request*>& running() const { return running_; }
  // In the order they will be admitted.
  const auto& waiting() const { return waiting_; }

 private:
  struct WaitingOrder {
    bool operator()(const Request* a, const Request* b) const {
      if (a->params.priority != b->params.priority) return a->params.priority < b->params.priority;
      return a->arrival < b->arrival;
    }
  };

  void ScheduleRunning(SchedulerOutput& out, int32_t& budget);
  void AdmitWaiting(SchedulerOutput& out, int32_t& budget);
  // Frees the newest running request's blocks and queues it again.
  Request* PreemptNewest(SchedulerOutput& out);

  SchedulerConfig config_;
  KvCacheManager& kv_;
  RunGate* gate_;
  std::list<Request*> running_;  // in admission order
  std::set<Request*, WaitingOrder> waiting_;
  int64_t num_preemptions_ = 0;
};

}  // namespace kvfleet::engine
