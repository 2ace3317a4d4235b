// The cachemanager's index under any sequence of registrations, event
// batches (stored, removed, cleared, snapshots; in order, repeated, skipping
// ahead, for unknown workers or old incarnations), liveness sweeps and
// lookups, as workers, or anyone who can reach its port, might send them.
// After every step the index and the registry agree (CheckInvariants), and a
// lookup never reports more blocks than it was asked about.
#include <string>
#include <vector>

#include "services/cachemanager/index/kv_map.h"
#include "services/cachemanager/server/proto_convert.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using namespace kvfleet;
using namespace kvfleet::cachemanager;

// Hashes from a small alphabet, so events overlap and chains repeat.
std::string Hash(uint8_t i) { return std::string(15, 'h') + static_cast<char>(i % 32); }

void AddHashes(fuzz::FuzzInput& in, google::protobuf::RepeatedPtrField<std::string>* out) {
  const int n = in.Byte() % 9;
  for (int i = 0; i < n; ++i) {
    const uint8_t b = in.Byte();
    *out->Add() = b == 255 ? std::string(in.Byte() % 20, 'x') : Hash(b);  // now and then a malformed hash
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::FuzzInput in(data, size);
  KvMap map({.liveness_deadline = std::chrono::seconds(3)});
  Clock::time_point now{};
  uint64_t sequence[4] = {0, 0, 0, 0};
  uint64_t incarnation[4] = {1, 1, 1, 1};
  while (!in.empty()) {
    const uint8_t op = in.Byte() % 8;
    const int w = in.Byte() % 4;
    const std::string id = "worker-" + std::to_string(w);
    if (op == 0) {
      v1::RegisterRequest r;
      r.set_worker_id(in.Byte() == 0 ? "" : id);
      incarnation[w] += in.Byte() % 2;
      r.set_incarnation(incarnation[w]);
      r.set_endpoint("127.0.0.1:" + std::to_string(5000 + w));
      r.set_model_id(in.Byte() % 2 ? "m" : "other");
      r.set_block_size(in.Byte() % 2 ? 16 : 0);
      r.set_capacity_blocks(in.Byte());
      absl::StatusOr<WorkerDescriptor> d = ToDescriptor(r);
      if (d.ok()) {
        // Refused (an id held by a live worker elsewhere) changes nothing.
        if (map.Register(*d, now).ok()) sequence[w] = 0;
      }
    } else if (op <= 4) {
      v1::EventBatch b;
      b.set_worker_id(id);
      b.set_incarnation(incarnation[w] + (in.Byte() == 7 ? 1 : 0));
      const uint8_t seq = in.Byte();
      sequence[w] = seq < 200 ? sequence[w] + 1 : seq < 230 ? sequence[w] + 2 : sequence[w];
      b.set_sequence(sequence[w]);
      const int events = 1 + in.Byte() % 4;
      for (int e = 0; e < events; ++e) {
        v1::KvEvent* ev = b.add_events();
        switch (in.Byte() % 4) {
          case 0: {
            v1::BlockStored* s = ev->mutable_stored();
            AddHashes(in, s->mutable_hashes());
            if (in.Byte() % 2) s->set_parent(Hash(in.Byte()));
            break;
          }
          case 1:
            AddHashes(in, ev->mutable_removed()->mutable_hashes());
            break;
          case 2:
            ev->mutable_cleared();
            break;
          default:
            AddHashes(in, ev->mutable_snapshot()->mutable_hashes());
        }
      }
      if (in.Byte() % 2) b.mutable_load()->set_blocks_used(in.Byte());
      absl::StatusOr<KvEventBatch> batch = ToKvEventBatch(b);
      if (batch.ok()) (void)map.Apply(*batch, now);
    } else if (op == 5) {
      now += std::chrono::milliseconds(in.Below(5000));
      map.Sweep(now);
    } else if (op == 6) {
      v1::EventBatch raw;
      if (raw.ParseFromString(in.String(255))) {
        absl::StatusOr<KvEventBatch> batch = ToKvEventBatch(raw);
        if (batch.ok()) (void)map.Apply(*batch, now);
      }
    } else {
      std::vector<BlockHash> chain;
      google::protobuf::RepeatedPtrField<std::string> hashes;
      AddHashes(in, &hashes);
      absl::StatusOr<std::vector<BlockHash>> parsed = ParseHashes(hashes, "hashes");
      if (parsed.ok()) {
        for (const WorkerOverlapInfo& o : map.FindOverlaps("m", *parsed)) {
          fuzz::Check(o.matched_blocks <= static_cast<int64_t>(parsed->size()), "an overlap longer than the chain");
        }
      }
    }
    const absl::Status invariants = map.CheckInvariants();
    fuzz::Check(invariants.ok(), "index invariants: " + std::string(invariants.message()));
  }
  return 0;
}
