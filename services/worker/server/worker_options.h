// The worker process's configuration, from its command line.
//
//   ASSIGN_OR_RETURN(WorkerOptions o, ParseWorkerOptions(args));
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/worker_role.h"
#include "engine/calibration/mode_choice.h"
#include "engine/executor/executor_options.h"
#include "engine/kv/tiers/kv_tier_manager.h"
#include "engine/request/speculation_options.h"
#include "engine/scheduler/scheduler.h"
#include "engine/spec/proposer_set.h"
#include "services/limits/request_limits.h"
#include "services/transport/transport_options.h"

namespace kvfleet::worker {

// A router multiplexes every stream it sends a worker over one connection.
inline const transport::TransportOptions kWorkerTransportDefaults{
    .listen = "127.0.0.1:50051", .metrics_port = 9464, .max_concurrent_streams = 8192};

struct WorkerOptions {
  std::string model_path;
  std::string model_id;  // default: the model file's name without .gguf
  // What the worker tells routers about its model (DescribeModel): the
  // name clients use (empty: the id), and a chat template file that
  // replaces the model's (empty: the model's).
  std::string served_model_name;
  std::string chat_template_path;
  transport::TransportOptions transport = kWorkerTransportDefaults;
  std::string device = "auto";  // auto, cpu, cuda, cuda:N
  // The KV cache's bytes ("2GiB") or a fraction of what the device has free
  // once weights and scratch are in place ("0.9"); see memory_plan.h.
  std::string kv_cache_memory = "1GiB";
  int64_t block_size = 16;
  int threads = 0;  // 0: one per hardware thread
  // Ranks one replica's model is split across (model/arch/shard_plan.h).
  int32_t tensor_parallel = 1;
  // --fault-tensor-parallel-rank R:N (chaos tests): rank R fails its N-th step.
  engine::TensorParallelRankFault fault_tensor_parallel_rank;
  // --cpu-activations and --kv-cache-dtype: a mode each, or auto (nullopt,
  // the default): chosen at start from the calibration record (worker_mode.h).
  engine::ModeSetting mode;
  std::string calibration_path;    // empty: beside the model (engine::CalibrationPathFor)
  engine::KvTierOptions kv_tiers;  // host-memory and disk tiers below the device cache
  // Unset: the device's default (SchedulerConfig::DefaultsFor).
  std::optional<int32_t> max_num_seqs;
  std::optional<int32_t> max_num_batched_tokens;
  int32_t admission_bypass_limit = engine::SchedulerConfig{}.admission_bypass_limit;
  int32_t max_waiting_requests = 256;
  bool enable_prefix_caching = true;
  // Sliding-window layers give back the KV pages their window has passed
  // (--keep-window-blocks turns it off: every layer keeps every block).
  bool free_window_blocks = true;
  engine::spec::SpeculationOptions speculation{.proposer = "ngram"};
  engine::spec::ProposerConfig proposers;
  std::chrono::milliseconds drain_timeout{30000};
  std::chrono::milliseconds stall_timeout{60000};
  std::string cachemanager;       // host:port; empty: publish no KV events
  std::string worker_id;          // default: the advertised address
  std::string advertise_address;  // where routers reach this worker; default: the bound address
  std::string cache_dir;          // what it can recompute (the model's fingerprint); empty: nothing kept
  limits::RequestLimits limits;
  int64_t fault_drop_event_batch = 0;  // chaos tests only (KvEventPublisherOptions)
  // KV blocks between workers (services/worker/transfer): where this worker
  // serves its blocks (empty: it serves none; it still pulls from peers a
  // router names), a pull's deadline, pulls at once each way, and a fault
  // for chaos tests (KvTransferServiceOptions::fault).
  std::string kv_transfer_listen;
  std::chrono::milliseconds kv_transfer_deadline{10000};
  int32_t kv_transfer_max_pulls = 4;
  // With TLS: the client certificate names the transfer port admits (its
  // peers', not the routers' that --tls-allowed-peers names; empty: any the
  // CA signed), and the name the peers' certificates carry (empty: their
  // address's host).
  std::vector<std::string> kv_transfer_allowed_peers;
  std::string kv_transfer_tls_name;
  // Bytes of KV this worker's pulls may hold in flight, in all and from one
  // peer (their blocks wait in host memory until the engine takes them).
  int64_t kv_transfer_max_bytes = int64_t{512} << 20;
  int64_t kv_transfer_max_peer_bytes = int64_t{256} << 20;
  std::string fault_kv_transfer;
  // Disaggregated prefill and decode: which phases routers send it, and
  // how long a handed-off prefill's blocks wait for the decode worker's
  // pull (engine::EngineOptions::kv_lease_duration).
  WorkerRole role = WorkerRole::kBoth;
  std::chrono::milliseconds kv_lease{30000};
  // LoRA adapters: those loaded at start (--lora NAME=PATH, in order), how
  // many the executor holds at once and their largest rank (the memory plan
  // reserves that much), and a directory whose DIR/NAME adapters load on
  // first use.
  std::vector<std::pair<std::string, std::string>> loras;
  int32_t max_loras = 0;
  int32_t max_lora_rank = 16;
  std::string lora_dir;
};

// --help: the worker's flags and the shared transport flags.
std::string WorkerUsage();

absl::StatusOr<WorkerOptions> ParseWorkerOptions(const std::vector<std::string>& args);

// The scheduler for the device the model landed on: its defaults, with the
// flags that were given. INVALID_ARGUMENT for a combination it refuses.
absl::StatusOr<engine::SchedulerConfig> ResolveScheduler(const WorkerOptions& options, engine::DeviceKind device);

}  // namespace kvfleet::worker
