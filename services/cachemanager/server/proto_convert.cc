#include "services/cachemanager/server/proto_convert.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "services/transport/wire/kv_tier_convert.h"
#include "services/transport/wire/load_report_convert.h"

namespace kvfleet::cachemanager {

absl::StatusOr<std::vector<BlockHash>> ParseHashes(const google::protobuf::RepeatedPtrField<std::string>& hashes,
                                                   const std::string& field) {
  std::vector<BlockHash> out;
  out.reserve(hashes.size());
  for (int i = 0; i < hashes.size(); ++i) {
    const std::optional<BlockHash> h = BlockHash::FromBytes(hashes[i]);
    if (!h) {
      return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "] is ", hashes[i].size(),
                                                     " bytes; block hashes are 16 bytes (hi then lo, big-endian)"));
    }
    out.push_back(*h);
  }
  return out;
}

absl::StatusOr<WorkerDescriptor> ToDescriptor(const v1::RegisterRequest& r) {
  if (r.worker_id().empty() || r.worker_id().size() > 256) {
    return absl::InvalidArgumentError("worker_id must be 1 to 256 bytes");
  }
  if (r.endpoint().empty()) return absl::InvalidArgumentError("endpoint is empty; give the worker's host:port");
  if (r.model_id().empty()) return absl::InvalidArgumentError("model_id is empty");
  if (r.block_size() <= 0 || r.capacity_blocks() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("block_size must be > 0 and capacity_blocks >= 0, got ",
                                                   r.block_size(), " and ", r.capacity_blocks()));
  }
  if (r.host_capacity_blocks() < 0 || r.disk_capacity_blocks() < 0) {
    return absl::InvalidArgumentError("host_capacity_blocks and disk_capacity_blocks must be >= 0");
  }
  return WorkerDescriptor{.worker_id = r.worker_id(),
                          .incarnation = r.incarnation(),
                          .endpoint = r.endpoint(),
                          .model_id = r.model_id(),
                          .block_size = r.block_size(),
                          .capacity_blocks = r.capacity_blocks(),
                          .numerics = r.numerics(),
                          .role = r.role(),
                          .host_capacity_blocks = r.host_capacity_blocks(),
                          .disk_capacity_blocks = r.disk_capacity_blocks()};
}

namespace {

// A parent as the wire carries it: empty for a chain's first block.
absl::StatusOr<ChainParent> ParseParent(const std::string& bytes, const std::string& field) {
  if (bytes.empty()) return ChainParent::Root();
  if (const std::optional<BlockHash> parent = BlockHash::FromBytes(bytes)) return ChainParent::Of(*parent);
  return absl::InvalidArgumentError(absl::StrCat(field, " is ", bytes.size(), " bytes; block hashes are 16 bytes"));
}

absl::StatusOr<KvEventRecord> ToRecord(const v1::KvEvent& e, int index) {
  const std::string at = absl::StrCat("events[", index, "]");
  KvEventRecord r;
  switch (e.event_case()) {
    case v1::KvEvent::kStored: {
      r.kind = KvEventRecord::Kind::kStored;
      ASSIGN_OR_RETURN(r.hashes, ParseHashes(e.stored().hashes(), at + ".stored.hashes"));
      ASSIGN_OR_RETURN(r.parent, ParseParent(e.stored().parent(), at + ".stored.parent"));
      const std::optional<KvTier> tier = transport::FromProto(e.stored().tier());
      if (!tier) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".stored.tier ", e.stored().tier(), " is not a KV tier (device, host or disk)"));
      }
      r.tier = *tier;
      return r;
    }
    case v1::KvEvent::kRemoved: {
      r.kind = KvEventRecord::Kind::kRemoved;
      ASSIGN_OR_RETURN(r.hashes, ParseHashes(e.removed().hashes(), at + ".removed.hashes"));
      return r;
    }
    case v1::KvEvent::kCleared:
      r.kind = KvEventRecord::Kind::kCleared;
      return r;
    case v1::KvEvent::kSnapshot: {
      r.kind = KvEventRecord::Kind::kSnapshot;
      ASSIGN_OR_RETURN(r.hashes, ParseHashes(e.snapshot().hashes(), at + ".snapshot.hashes"));
      const auto& parents = e.snapshot().parents();
      if (!parents.empty() && parents.size() != e.snapshot().hashes().size()) {
        return absl::InvalidArgumentError(absl::StrCat(at, ".snapshot has ", parents.size(), " parents for ",
                                                       e.snapshot().hashes().size(),
                                                       " hashes; give one per hash, or none"));
      }
      r.parents.reserve(parents.size());
      for (int i = 0; i < parents.size(); ++i) {
        ASSIGN_OR_RETURN(ChainParent parent, ParseParent(parents[i], absl::StrCat(at, ".snapshot.parents[", i, "]")));
        r.parents.push_back(parent);
      }
      return r;
    }
    case v1::KvEvent::EVENT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(at, " has no event set"));
}

}  // namespace

absl::StatusOr<KvEventBatch> ToKvEventBatch(const v1::EventBatch& b) {
  KvEventBatch out{.worker_id = b.worker_id(), .incarnation = b.incarnation(), .sequence = b.sequence()};
  if (b.sequence() == 0) return absl::InvalidArgumentError("sequence must start at 1");
  out.events.reserve(b.events_size());
  for (int i = 0; i < b.events_size(); ++i) {
    ASSIGN_OR_RETURN(KvEventRecord r, ToRecord(b.events(i), i));
    out.events.push_back(std::move(r));
  }
  if (b.has_load()) out.load = FromProto(b.load());
  return out;
}

v1::WorkerEntry ToProto(const WorkerView& w, Clock::time_point now) {
  v1::WorkerEntry out;
  out.set_worker_id(w.descriptor.worker_id);
  out.set_incarnation(w.descriptor.incarnation);
  out.set_endpoint(w.descriptor.endpoint);
  out.set_model_id(w.descriptor.model_id);
  out.set_block_size(w.descriptor.block_size);
  out.set_capacity_blocks(w.descriptor.capacity_blocks);
  out.set_numerics(w.descriptor.numerics);
  out.set_role(w.descriptor.role.empty() ? "both" : w.descriptor.role);
  out.set_indexed_blocks(w.indexed_blocks);
  *out.mutable_load() = ToProto(w.load);
  out.set_last_seen_ms_ago(std::chrono::duration_cast<std::chrono::milliseconds>(now - w.last_seen).count());
  return out;
}

v1::WorkerChange ToProto(const MembershipChange& c, Clock::time_point now) {
  v1::WorkerChange out;
  switch (c.kind) {
    case MembershipChange::Kind::kJoined:
      out.set_kind(v1::WorkerChange::JOINED);
      break;
    case MembershipChange::Kind::kDraining:
      out.set_kind(v1::WorkerChange::DRAINING);
      break;
    case MembershipChange::Kind::kLeft:
      out.set_kind(v1::WorkerChange::LEFT);
      break;
  }
  *out.mutable_worker() = ToProto(c.worker, now);
  return out;
}

}  // namespace kvfleet::cachemanager
