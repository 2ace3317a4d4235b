// One worker's load at an instant, in one plain struct everywhere: the
// worker fills it from its engine, the cachemanager keeps the latest and
// serves it with each FindOverlaps answer, the router places by it and the
// simulator drives the router's policy with it. Its wire form is the proto
// LoadReport; services/transport/wire/load_report_convert.h holds the one
// conversion pair.
//
//   WorkerLoad load{.running = 3, .blocks_total = 1000, .blocks_free = 700};
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvfleet {

// A router's newest placement ticket the worker admitted: the figures
// already count that request (and, tickets increasing, the router's
// earlier ones to the same worker).
struct AdmittedTicket {
  uint64_t router = 0;
  uint64_t ticket = 0;
  bool operator==(const AdmittedTicket&) const = default;
};

struct WorkerLoad {
  // A report lists at most this many routers (the worker's own bound);
  // more are cut, so one report cannot grow anyone's memory.
  static constexpr size_t kMaxAdmittedRouters = 64;
  // And at most this many resident adapters (far more than any device's slots).
  static constexpr size_t kMaxResidentLora = 256;

  int32_t running = 0;
  int32_t waiting = 0;
  int32_t blocks_used = 0;  // held by requests
  int32_t blocks_free = 0;  // allocatable, cached-but-unreferenced blocks included
  int32_t blocks_total = 0;
  // Prompt tokens queued or mid-prefill that no earlier request on the
  // worker is already computing (a shared prefix counts once).
  int64_t pending_prefill_tokens = 0;
  bool draining = false;
  // Measured prefill rate, tokens/s; 0 until known.
  double prefill_tokens_per_second = 0.0;
  // Measured time to bring one KV block back to the device from each tier
  // below it; 0: no such tier, or nothing loaded from it yet.
  double host_load_seconds_per_block = 0.0;
  double disk_load_seconds_per_block = 0.0;
  // Measured time to pull one KV block from a peer worker (recent pulls,
  // smoothed); 0 until its first pull. And what one block weighs on the
  // wire, which prices a first pull at an assumed bandwidth.
  double peer_pull_seconds_per_block = 0.0;
  int64_t kv_block_bytes = 0;
  std::vector<AdmittedTicket> admitted;
  // The LoRA adapters in the device slots now ("name@digest"), and the mean
  // measured time to load one there (0 before the first): a request under
  // an adapter placed where it is not resident waits for that load.
  std::vector<std::string> resident_lora;
  double lora_slot_load_seconds = 0.0;

  bool operator==(const WorkerLoad&) const = default;
};

}  // namespace kvfleet
