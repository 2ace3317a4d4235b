// The worker process's configuration, from its command line.
//
//   ASSIGN_OR_RETURN(WorkerOptions o, ParseWorkerOptions(args));
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/worker/engine/scheduler/scheduler.h"
#include "services/worker/engine/spec/proposer_set.h"
#include "services/worker/engine/spec/speculation_options.h"

namespace kvfleet::worker {

struct WorkerOptions {
  std::string model_path;
  std::string model_id;          // default: the model file's name without .gguf
  std::string listen = "127.0.0.1:50051";
  std::string metrics_host = "0.0.0.0";
  int metrics_port = 9464;       // 0: a free port
  std::string kv_cache_memory = "1GiB";  // bytes ("2GiB") or a fraction of available memory ("0.2")
  int64_t block_size = 16;
  int threads = 0;               // 0: one per hardware thread
  engine::SchedulerConfig scheduler;
  int32_t max_waiting_requests = 256;
  bool enable_prefix_caching = true;
  engine::spec::SpeculationOptions speculation{.proposer = "ngram"};
  engine::spec::ProposerConfig proposers;
  std::chrono::milliseconds drain_timeout{30000};
  std::chrono::milliseconds stall_timeout{60000};
  int32_t max_message_bytes = 1 << 20;
  std::string log_level = "info";
  std::string cachemanager;        // host:port; empty: publish no KV events
  std::string worker_id;           // default: the advertised address
  std::string advertise_address;   // where routers reach this worker; default: the bound address
};

extern const char kWorkerUsage[];

absl::StatusOr<WorkerOptions> ParseWorkerOptions(const std::vector<std::string>& args);

// The KV cache budget in bytes: a size, or a fraction in (0, 1] of the
// memory available now.
absl::StatusOr<int64_t> ResolveKvCacheBytes(const std::string& spec);

}  // namespace kvfleet::worker
