#include "services/cachemanager/index/kv_map.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace kvfleet::cachemanager {

WorkerView KvMap::View(const Entry& e) const {
  return {.descriptor = e.descriptor,
          .load = e.load,
          .indexed_blocks = index_.BlockCount(e.slot),
          .indexed_host_blocks = index_.LowerBlockCount(e.slot, KvTier::kHost),
          .indexed_disk_blocks = index_.LowerBlockCount(e.slot, KvTier::kDisk),
          .last_seen = e.last_seen};
}

WorkerSlot KvMap::AllocateSlot() {
  if (!free_slots_.empty()) {
    const WorkerSlot slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  return WorkerSlot(next_slot_++);
}

MembershipChange KvMap::Remove(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  MembershipChange change{.kind = MembershipChange::Kind::kLeft, .worker = View(it->second)};
  index_.Clear(it->second.slot);  // before the slot can be handed out again
  free_slots_.push_back(it->second.slot);
  workers_.erase(it);
  return change;
}

absl::StatusOr<std::vector<MembershipChange>> KvMap::Register(const WorkerDescriptor& worker, Clock::time_point now) {
  std::vector<MembershipChange> changes;
  auto it = workers_.find(worker.worker_id);
  if (it != workers_.end() && it->second.descriptor.incarnation != worker.incarnation) {
    const WorkerDescriptor& holder = it->second.descriptor;
    if (holder.endpoint != worker.endpoint && now - it->second.last_seen <= options_.liveness_deadline) {
      return absl::AlreadyExistsError(
          absl::StrCat("worker id '", worker.worker_id, "' is already used by the live worker at ", holder.endpoint,
                       "; the worker at ", worker.endpoint, " was refused: give each worker its own --worker-id"));
    }
    changes.push_back(Remove(worker.worker_id));  // a restarted worker never inherits entries
    it = workers_.end();
  }
  if (it == workers_.end()) {
    it = workers_.emplace(worker.worker_id, Entry{.slot = AllocateSlot()}).first;
  }
  // Same incarnation again (a reconnect): keep the index until its snapshot
  // replaces it, but restart the sequence.
  Entry& e = it->second;
  e.descriptor = worker;
  e.last_seen = now;
  e.last_sequence = 0;
  e.needs_snapshot = true;
  e.snapshot_requested = false;
  changes.push_back({.kind = MembershipChange::Kind::kJoined, .worker = View(e)});
  return changes;
}

int64_t KvMap::BlockLimit(const Entry& e) const {
  if (e.descriptor.capacity_blocks <= 0) return options_.blocks_without_capacity;
  return e.descriptor.capacity_blocks + e.descriptor.host_capacity_blocks + e.descriptor.disk_capacity_blocks;
}

// The index's memory is bounded per worker by the capacity it registered: a
// worker can hold no more distinct blocks than that, so reports beyond it
// are a fault (lost removals, a bug, a hostile client) and are dropped, not
// indexed; the worker is asked for a snapshot to get back in step.
bool KvMap::ApplyEvent(Entry& e, const KvEventRecord& event) {
  ++counters_.events_ingested;
  const int64_t limit = BlockLimit(e);
  switch (event.kind) {
    case KvEventRecord::Kind::kStored: {
      // Hashes already held take no room, so only the new ones are counted.
      int64_t room = limit - index_.BlockCount(e.slot);
      size_t fit = 0;
      for (; fit < event.hashes.size(); ++fit) {
        if (index_.Holds(e.slot, event.hashes[fit])) continue;
        if (room == 0) break;
        --room;
      }
      index_.Store(e.slot, std::span(event.hashes).first(fit), event.tier, event.parent);
      if (fit == event.hashes.size()) return true;
      counters_.over_capacity_hashes += static_cast<int64_t>(event.hashes.size() - fit);
      return false;
    }
    case KvEventRecord::Kind::kRemoved:
      index_.Remove(e.slot, event.hashes);
      break;
    case KvEventRecord::Kind::kCleared:
      index_.Clear(e.slot);
      break;
    case KvEventRecord::Kind::kSnapshot: {
      const size_t fit = std::min<size_t>(event.hashes.size(), static_cast<size_t>(limit));
      index_.ReplaceAll(e.slot, std::span(event.hashes).first(fit),
                        std::span(event.parents).first(event.parents.empty() ? 0 : fit));
      ++counters_.snapshots;
      if (fit < event.hashes.size()) {
        counters_.over_capacity_hashes += static_cast<int64_t>(event.hashes.size() - fit);
        return false;
      }
      e.needs_snapshot = false;
      e.snapshot_requested = false;
      break;
    }
  }
  return true;
}

absl::StatusOr<ApplyResult> KvMap::Apply(const KvEventBatch& batch, Clock::time_point now) {
  auto it = workers_.find(batch.worker_id);
  if (it == workers_.end() || it->second.descriptor.incarnation != batch.incarnation) {
    ++counters_.rejected_batches;
    return absl::NotFoundError(absl::StrCat("worker '", batch.worker_id, "' incarnation ", batch.incarnation,
                                            " is not registered (it was removed or replaced); call Register and "
                                            "start a new event stream with a snapshot"));
  }
  Entry& e = it->second;
  if (batch.sequence <= e.last_sequence) {
    ++counters_.rejected_batches;
    return absl::FailedPreconditionError(absl::StrCat("worker '", batch.worker_id, "': sequence ", batch.sequence,
                                                      " does not follow ", e.last_sequence,
                                                      "; sequences must increase by one per batch"));
  }
  ApplyResult result;
  if (batch.sequence != e.last_sequence + 1) {
    ++counters_.sequence_gaps;
    e.needs_snapshot = true;
    e.snapshot_requested = false;
    result.reason = absl::StrCat("sequence jumped from ", e.last_sequence, " to ", batch.sequence,
                                 "; events were lost");
  }
  e.last_sequence = batch.sequence;
  e.last_seen = now;
  for (const KvEventRecord& event : batch.events) {
    if (!ApplyEvent(e, event) && !e.needs_snapshot) {
      e.needs_snapshot = true;
      e.snapshot_requested = false;
      if (result.reason.empty()) {
        result.reason = absl::StrCat("more blocks reported than the ", BlockLimit(e), " the worker registered");
      }
    }
  }
  if (batch.load) {
    const bool started_draining = batch.load->draining && !e.load.draining;
    e.load = *batch.load;
    if (started_draining) result.changes.push_back({.kind = MembershipChange::Kind::kDraining, .worker = View(e)});
  }
  if (e.needs_snapshot && !e.snapshot_requested) {
    e.snapshot_requested = true;
    result.send_snapshot = true;
    if (result.reason.empty()) result.reason = "no snapshot since the worker registered";
  }
  return result;
}

std::vector<WorkerOverlapInfo> KvMap::FindOverlaps(const std::string& model_id,
                                                   std::span<const BlockHash> hashes) const {
  absl::flat_hash_map<int32_t, Overlap> matched;  // by slot
  for (const Overlap& o : index_.FindOverlaps(hashes)) matched[o.worker.value()] = o;
  std::vector<WorkerOverlapInfo> out;
  for (const auto& [id, e] : workers_) {
    if (e.descriptor.model_id != model_id) continue;
    WorkerOverlapInfo info{.worker = View(e)};
    if (const auto m = matched.find(e.slot.value()); m != matched.end()) {
      info.matched_blocks = m->second.matched_blocks;
      info.host_blocks = m->second.host_blocks;
      info.disk_blocks = m->second.disk_blocks;
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const WorkerOverlapInfo& a, const WorkerOverlapInfo& b) {
    return a.worker.descriptor.worker_id < b.worker.descriptor.worker_id;
  });
  return out;
}

std::vector<MembershipChange> KvMap::Sweep(Clock::time_point now) {
  std::vector<std::string> dead;
  for (const auto& [id, e] : workers_) {
    if (now - e.last_seen > options_.liveness_deadline) dead.push_back(id);
  }
  std::vector<MembershipChange> changes;
  for (const std::string& id : dead) changes.push_back(Remove(id));
  return changes;
}

std::vector<WorkerView> KvMap::List(const std::string& model_id) const {
  std::vector<WorkerView> out;
  for (const auto& [id, e] : workers_) {
    if (model_id.empty() || e.descriptor.model_id == model_id) out.push_back(View(e));
  }
  std::sort(out.begin(), out.end(), [](const WorkerView& a, const WorkerView& b) {
    return a.descriptor.worker_id < b.descriptor.worker_id;
  });
  return out;
}

absl::Status KvMap::CheckInvariants() const {
  absl::flat_hash_set<int32_t> used;
  for (const auto& [id, e] : workers_) {
    if (!used.insert(e.slot.value()).second) {
      return absl::InternalError(absl::StrCat("slot ", e.slot.value(), " belongs to two workers"));
    }
  }
  for (WorkerSlot s : free_slots_) {
    if (used.contains(s.value())) return absl::InternalError(absl::StrCat("slot ", s.value(), " is free and used"));
    if (index_.BlockCount(s) != 0) {
      return absl::InternalError(absl::StrCat("free slot ", s.value(), " still has indexed blocks"));
    }
  }
  return index_.CheckInvariants();
}

}  // namespace kvfleet::cachemanager
