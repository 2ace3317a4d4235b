#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kvfleet::engine {

absl::Status SchedulerConfig::Validate() const {
  if (max_num_batched_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_batched_tokens must be >= 1, got ", max_num_batched_tokens));
  }
  if (max_num_seqs < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_num_seqs must be >= 1, got ", max_num_seqs));
  return absl::OkStatus();
}

SchedulerConfig SchedulerConfig::DefaultsFor(DeviceKind device) {
  if (device == DeviceKind::kCuda) return {.max_num_batched_tokens = 8192, .max_num_seqs = 256};
  return {};
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv, RunGate* gate)
    : config_(config), kv_(kv), gate_(gate) {}

void Scheduler::Add(Request* req) {
  CHECK(req->block_table.empty());
  req->state = RequestState::kWaiting;
  waiting_.insert(req);
}

void Scheduler::Remove(Request* req) {
  waiting_.erase(req);
  running_.remove(req);
  kv_.Free(*req);
  if (gate_ != nullptr) gate_->Release(*req);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  int32_t budget = config_.max_num_batched_tokens;
  ScheduleRunning(out, budget);
  // After a preemption the pool is the bottleneck: admitting now would only
  // preempt again next step.
  if (out.preempted.empty()) AdmitWaiting(out, budget);
  for (const ScheduledChunk& c : out.chunks) out.num_tokens += c.num_tokens;
  return out;
}

void Scheduler::ScheduleRunning(SchedulerOutput& out, int32_t& budget) {
  int32_t not_yet_scheduled = static_cast<int32_t>(running_.size());
  for (auto it = running_.begin(); it != running_.end() && budget > 0;) {
    Request* req = *it;
    --not_yet_scheduled;
    const int32_t pending = std::min(req->num_pending_tokens(), budget);
    int32_t n = pending;
    if (!req->draft.empty()) {
      req->TruncateDraft(static_cast<size_t>(budget - pending));
      n += static_cast<int32_t>(req->draft.size());
      // Speculation never costs anyone their blocks: a draft's blocks must
      // leave one for each running request still to be scheduled.
      const int32_t spare = kv_.num_free_blocks() - kv_.MissingBlocks(*req, n);
      if (!req->draft.empty() && (spare < not_yet_scheduled || !kv_.Allocate(*req, n))) {
        req->ClearDraft();
        n = pending;
      }
    }
    if (n <= 0) {
      ++it;
      continue;
    }
    bool preempted_self = false;
    while (!kv_.Allocate(*req, n)) {
      Request* victim = PreemptNewest(out);
      if (victim == req) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;  // req was the newest: everything after it is gone too
    out.chunks.push_back({req, n, static_cast<int32_t>(req->draft.size())});
    budget -= n;
    ++it;
  }
}

Request* Scheduler::PreemptNewest(SchedulerOutput& out) {
  CHECK(!running_.empty());
  Request* victim = running_.back();
  running_.pop_back();
  kv_.Free(*victim);
  if (gate_ != nullptr) gate_->Release(*victim);
  victim->ClearDraft();
  victim->kv_load_tried = false;  // its blocks may go down a tier before it returns
  victim->state = RequestState::kWaiting;
  ++victim->num_preemptions;
  ++num_preemptions_;
  waiting_.insert(victim);  // keeps its arrival: back at the front of its priority
  out.preempted.push_back(victim);
  return victim;
}

void Scheduler::AdmitWaiting(SchedulerOutput& out, int32_t& budget) {
  if (config_.static_batching && !running_.empty()) return;
  // Requests this step found too big for the free blocks: later ones pass
  // them only while each has been passed fewer than admission_bypass_limit
  // times, and only within their priority.
  std::vector<Request*> blocked;
  // Each request that does not fit costs a walk of its prefix: look past a
  // few at most.
  constexpr size_t kMaxBlockedPerStep = 8;
  for (auto it = waiting_.begin();
       it != waiting_.end() && budget > 0 && static_cast<int32_t>(running_.size()) < config_.max_num_seqs;) {
    Request* req = *it;
    if (!blocked.empty() && req->params.priority != blocked.front()->params.priority) break;
    if (req->kv_loading) {  // its prefix is still coming back from disk: the others go ahead
      ++it;
      continue;
    }
    // Admit only while every running request keeps a block to grow into:
    // admitting into the last free blocks only buys a preemption (and its
    // recompute) a few steps later. An idle engine always admits. Checked
    // before the lookup, which would copy a prefix up from host memory
    // only to give it back.
    // (A block is a page per page group.)
    const int32_t reserve =
        running_.empty() ? 0
                         : config_.growth_reserve_blocks * kv_.num_groups() * static_cast<int32_t>(running_.size() + 1);
    const std::optional<int32_t> cost = kv_.BlocksToAdmit(*req, budget);
    const bool fits = !cost.has_value() || kv_.num_free_blocks() - *cost >= reserve;
    if (fits) kv_.AcquireCachedPrefix(*req);
    if (fits && (req->kv_loading || req->kv_awaits_disk)) {  // the lookup started that load, or waits to
      kv_.Free(*req);
      ++it;
      continue;
    }
    if (fits && gate_ != nullptr) {
      const RunGate::Verdict verdict = gate_->Acquire(*req);
      if (verdict != RunGate::Verdict::kAdmit) {
        kv_.Free(*req);
        if (verdict == RunGate::Verdict::kFail) {
          it = waiting_.erase(it);
          out.failed.push_back(req);
        } else {
          ++it;  // its slot frees when another adapter's request stops; the others go ahead
        }
        continue;
      }
    }
    const int32_t n = std::min(req->num_pending_tokens(), budget);
    if (!fits || !kv_.Allocate(*req, n) || kv_.num_free_blocks() < reserve) {
      kv_.Free(*req);  // give the blocks and the cached prefix back; try again next step
      if (gate_ != nullptr) gate_->Release(*req);
      if (req->admissions_bypassed >= config_.admission_bypass_limit) break;
      blocked.push_back(req);
      if (blocked.size() >= kMaxBlockedPerStep) break;
      ++it;
      continue;
    }
    for (Request* b : blocked) ++b->admissions_bypassed;
    req->admissions_bypassed = 0;
    it = waiting_.erase(it);
    kv_.RecordAdmission(*req);
    req->state = RequestState::kRunning;
    running_.push_back(req);
    out.chunks.push_back({req, n});
    budget -= n;
  }
}

}  // namespace kvfleet::engine
