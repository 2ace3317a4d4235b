#include "services/worker/server/worker_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/byte_size.h"
#include "common/cache_dir.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "model/model.h"

namespace kvfleet::worker {

namespace {

const char kUsageHead[] = R"(kvfleet-worker: one model replica behind gRPC (proto/kvfleet/v1/worker.proto)

  --model PATH                 a GGUF file or a Hugging Face checkpoint directory (required)
  --model-id ID                name that roots prefix-cache hashes (default: the file's name without its
                               extension, or the directory's name); routers route requests naming it here
  --served-model-name NAME     what clients call the model (default: its id); routers learn it from here
  --chat-template PATH         a Jinja chat template that replaces the model's own, for the routers that learn
                               the model from this worker (they render chats; the worker only takes token ids)
)";

const char kUsageTail[] =
    R"(  --device auto|cpu|cuda[:N]   where the model runs (default auto: GPU 0 when one is usable, else the CPU;
                               the log says which). A GPU that is asked for but cannot be used is an error.
  --kv-cache-memory SIZE       KV cache budget: bytes (2GiB, 512MiB) or a fraction (0.9) of what the device has
                               free once weights and scratch are loaded (CPU: MemAvailable and the cgroup limit);
                               default 1GiB
  --block-size N               tokens per KV block (default 16)
  --cpu-activations auto|f32|q8
                               CPU backend: activations for quantized weights as float32 or 8-bit per 32-value
                               block with integer dot products (faster; other tokens, numerics cpu-q8/3)
  --kv-cache-dtype auto|f16|int8|int8_rotated|fp8_e4m3
                               the KV cache's element format. int8 (a scale per token and head), int8_rotated
                               (keys rotated by a Hadamard transform first, which spreads outlier channels)
                               and fp8_e4m3 hold about twice the tokens in the same memory, but change tokens
                               (numerics +kv-int8, +kv-int8_rotated, +kv-fp8_e4m3)
                               auto (both flags' default): the fastest mode that the model's calibration
                               record says is no less accurate than llama.cpp's own on that model (KL
                               divergence from float64), else the exact one (f32, f16); the log says which
                               and why (docs/operations.md, "Choosing a mode")
  --calibration PATH           the calibration record (kvfleet eval --calibrate); default: beside the model,
                               MODEL.calibration.json (or kvfleet-calibration.json in a checkpoint directory)
  --kv-host-memory SIZE        a host-memory tier below the device KV cache (bytes: 8GiB; default 0: none).
                               Blocks the device evicts go there and come back on a prefix hit instead of
                               being recomputed; page-locked on a GPU. Counts against the pod's memory limit.
  --kv-disk-dir DIR            a local-disk tier below that (or below the device): one checksummed file per
                               block. A restarted worker adopts and announces what it finds there
  --kv-disk-size SIZE          the disk tier's bytes (required with --kv-disk-dir)
  --threads N                  CPU threads for the model (default: one per CPU this process may use: its
                               affinity mask and cgroup CPU limit, e.g. a pod's, not the node's cores)
  --lora NAME=PATH             serve the LoRA adapter in PATH (PEFT: adapter_config.json and
                               adapter_model.safetensors) as model NAME; repeatable. More load at run time
                               (LoadLoraAdapter, the router's POST /v1/load_lora_adapter)
  --max-loras N                adapters held on the device at once (default: the --lora count, 1 with only
                               --lora-dir, else 0: no adapters). A step mixes requests of all of them and the
                               base model; others load into the least recently used slot no request pins
  --max-lora-rank R            the largest adapter rank served (default 16); the memory plan reserves
                               --max-loras slots of this rank on every projection
  --lora-dir DIR               an adapter named NAME and not loaded yet is read from DIR/NAME on first use
  --tensor-parallel N          split the model across N ranks (also --tensor-parallel-size; default 1): each
                               holds its share of the heads, feed-forward and vocabulary, and of every KV
                               block. A degree the model cannot split is refused with the ones it can. The
                               CPU runs the ranks in turn in this process (tokens: numerics +tpN); on GPUs
                               rank i runs on --device's GPU + i, the ranks meeting over NCCL (loaded at run
                               time: libnccl.so.2 or KVFLEET_NCCL_LIBRARY; not yet run on GPUs)
  --max-num-seqs N             requests running at once (default 64 on CPU, 256 on GPU)
  --max-num-batched-tokens N   tokens per engine step (default 512 on CPU, 8192 on GPU)
  --admission-bypass N         admissions that may pass a waiting request too big for the free KV blocks
                               (one whose prefix is resident needs few); then it goes first (default 16;
                               0: strict arrival order)
  --max-waiting-requests N     queue beyond max-num-seqs before RESOURCE_EXHAUSTED (default 256; 0: unbounded)
  --no-prefix-caching          turn the prefix cache off
  --keep-window-blocks         a sliding-window model's windowed layers keep every block, as full-attention
                               layers do (default: they give back the blocks their window has passed; tokens
                               are the same either way)
  --speculation PROPOSER       default speculative decoding for requests that do not choose: ngram (prompt
                               lookup; default), suffix (the request's text and its tenant's earlier outputs), self, draft,
                               heads, auto (per request and step, the loaded proposer that pays best) or off.
                               Output is unchanged either way.
  --spec-max-draft-tokens N    most tokens drafted per request and step (default 8, at most 32)
  --no-spec-adaptive           always draft the maximum (default: adapt k to each request's acceptance and to the
                               batch, turning speculation off where a verify pass costs more than it saves)
  --spec-ngram-min N           shortest suffix n-gram looked up (default 2)
  --spec-ngram-max N           longest suffix n-gram looked up (default 4)
  --spec-suffix-store SIZE     memory for the suffix proposer's store of finished outputs (default 64MiB; 0: none,
                               the request's own text only)
  --spec-suffix-factor F       suffix drafts are at most F x the matched suffix's length (default 2)
  --spec-suffix-min-prob P     suffix drafts stop where the estimated probability falls below P (default 0.1)
  --spec-self-layers N         load "self": the model's first N layers draft (default 0: not loaded)
  --spec-draft-model PATH      load "draft": a GGUF with the same vocabulary (e.g. from kvfleet make-draft)
  --spec-draft-heads DIR       load "heads": draft heads trained for this exact model (tools/heads/README.md)
  --spec-heads-top-k K         > 1: the heads draft a tree of each head's K likeliest tokens, verified in one
                               pass (default 1: a chain)
  --cache-dir DIR              where the worker keeps what it can recompute: the model's fingerprint, which draft
                               heads are checked against and which takes a read of every weight (default
                               $KVFLEET_CACHE_DIR, $XDG_CACHE_HOME/kvfleet or ~/.cache/kvfleet; "" for none)
  --drain-timeout SECONDS      on SIGTERM, how long in-flight requests may take to finish (default 30)
  --stall-timeout SECONDS      health turns NOT_SERVING when the engine makes no progress this long (default 60)
  --cachemanager HOST:PORT     publish KV events and load there (default: none); serving never waits for it
  --worker-id ID               this worker's name in the cluster (default: the advertised address)
  --fault-drop-event-batch N   fault injection for tests: lose the Nth KV event batch on its way to the
                               cachemanager (default 0: none)
  --advertise-address H:P      where routers reach this worker (default: the address it bound)
  --kv-transfer-listen H:P     serve this worker's KV blocks to peers there (its own port, with the worker's
                               TLS or internal token; port 0 picks one); default: none. Pulls from a peer a
                               router names happen either way
  --kv-transfer-deadline SECONDS  a whole pull, and the engine's copy for one (default 10); a late pull computes
  --kv-transfer-max-pulls N    pulls at once, served and made (default 4); more are refused and computed
  --kv-transfer-allowed-peers NAMES  with TLS: client certificate names (comma-separated) the transfer
                               port admits; --tls-allowed-peers does not apply to it (default: any the CA signed)
  --kv-transfer-tls-name NAME  with TLS: the name peers' certificates carry (default: the address's host)
  --kv-transfer-max-bytes SIZE  KV bytes this worker's pulls hold in flight at most (default 512MiB); a pull
                               past it brings the leading blocks that fit, or none and computes them
  --kv-transfer-max-peer-bytes SIZE  the same from any one peer (default 256MiB)
  --role prefill|decode|both   which phases routers send it (default both): a prefill worker computes long
                               prompts and their first token, then holds their KV for a decode worker's pull
                               (needs --kv-transfer-listen); a decode worker takes everything else
  --kv-lease-seconds SECONDS   how long a handed-off prompt's KV waits for the decode worker's pull before it
                               becomes ordinary cache (default 30)
  --fault-kv-transfer F        fault injection for chaos tests: corrupt-chunk, truncate-block, or stall (3 s
                               before the first block) on every pull served (default: none)
  --fault-tensor-parallel-rank R:N
                               fault injection for chaos tests: tensor-parallel rank R fails its N-th step, as a
                               device error would; the worker reports it, naming the rank, and exits

On start it checks the flags, the device and the model file first (a refusal there ends it before it binds), then
prints "kvfleet-worker listening grpc=HOST:PORT metrics=HOST:PORT[ health=HOST:PORT]" once bound, and
"kvfleet-worker ready" once the model is loaded and health is SERVING. Readiness is off while
loading, draining or stalled; liveness while loading or stalled (it stays on while draining).
)";

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace

std::string WorkerUsage() {
  return absl::StrCat(kUsageHead, transport::TransportUsage(kWorkerTransportDefaults, "kvfleet.v1.Worker"), kUsageTail,
                      limits::LimitsUsage());
}

absl::StatusOr<WorkerOptions> ParseWorkerOptions(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      flags::Flags f,
      flags::Flags::Parse(
          args,
          transport::WithTransportFlags(limits::WithLimitFlags({"model",
                                                                "model-id",
                                                                "served-model-name",
                                                                "chat-template",
                                                                "device",
                                                                "kv-cache-memory",
                                                                "block-size",
                                                                "threads",
                                                                "tensor-parallel",
                                                                "tensor-parallel-size",
                                                                "cpu-activations",
                                                                "kv-cache-dtype",
                                                                "calibration",
                                                                "kv-host-memory",
                                                                "kv-disk-dir",
                                                                "kv-disk-size",
                                                                "max-num-seqs",
                                                                "max-num-batched-tokens",
                                                                "admission-bypass",
                                                                "max-waiting-requests",
                                                                "drain-timeout",
                                                                "stall-timeout",
                                                                "cachemanager",
                                                                "worker-id",
                                                                "advertise-address",
                                                                "cache-dir",
                                                                "speculation",
                                                                "spec-max-draft-tokens",
                                                                "spec-ngram-min",
                                                                "spec-ngram-max",
                                                                "spec-suffix-store",
                                                                "spec-suffix-factor",
                                                                "spec-suffix-min-prob",
                                                                "spec-self-layers",
                                                                "spec-draft-model",
                                                                "spec-draft-heads",
                                                                "spec-heads-top-k",
                                                                "fault-drop-event-batch",
                                                                "fault-tensor-parallel-rank",
                                                                "kv-transfer-listen",
                                                                "kv-transfer-deadline",
                                                                "kv-transfer-max-pulls",
                                                                "kv-transfer-max-bytes",
                                                                "kv-transfer-allowed-peers",
                                                                "kv-transfer-tls-name",
                                                                "kv-transfer-max-peer-bytes",
                                                                "fault-kv-transfer",
                                                                "role",
                                                                "kv-lease-seconds",
                                                                "lora",
                                                                "max-loras",
                                                                "max-lora-rank",
                                                                "lora-dir"})),
          transport::WithTransportSwitches({"no-prefix-caching", "no-spec-adaptive", "keep-window-blocks"})));
  WorkerOptions o;
  ASSIGN_OR_RETURN(o.model_path, f.GetString("model"));
  o.model_id = f.GetString("model-id", model::DefaultModelId(o.model_path));
  o.served_model_name = f.GetString("served-model-name", "");
  o.chat_template_path = f.GetString("chat-template", "");
  ASSIGN_OR_RETURN(o.transport, transport::ParseTransportOptions(f, kWorkerTransportDefaults));
  ASSIGN_OR_RETURN(o.limits, limits::ParseRequestLimits(f));
  ASSIGN_OR_RETURN(o.fault_drop_event_batch, f.GetInt("fault-drop-event-batch", 0));
  o.device = f.GetString("device", o.device);
  if (o.device != "auto") RETURN_IF_ERROR(engine::ParseDevice(o.device).status());
  o.kv_cache_memory = f.GetString("kv-cache-memory", o.kv_cache_memory);
  ASSIGN_OR_RETURN(o.block_size, f.GetInt("block-size", o.block_size));
  ASSIGN_OR_RETURN(o.mode.activations, engine::ParseCpuActivationsSetting(f.GetString("cpu-activations", "auto")));
  ASSIGN_OR_RETURN(o.mode.kv, engine::ParseKvCacheDtypeSetting(f.GetString("kv-cache-dtype", "auto")));
  o.calibration_path = f.GetString("calibration", "");
  if (f.Has("kv-host-memory")) {
    ASSIGN_OR_RETURN(o.kv_tiers.host_bytes, ParseByteSize(f.GetString("kv-host-memory", "")));
  }
  o.kv_tiers.disk_dir = f.GetString("kv-disk-dir", "");
  if (f.Has("kv-disk-size")) {
    ASSIGN_OR_RETURN(o.kv_tiers.disk_bytes, ParseByteSize(f.GetString("kv-disk-size", "")));
  }
  if (absl::Status s = o.kv_tiers.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(s.message(), " (--kv-host-memory, --kv-disk-dir, --kv-disk-size)"));
  }
  ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 0));
  o.threads = static_cast<int>(threads);
  for (const std::string& spec : f.GetStrings("lora")) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--lora takes NAME=PATH (a PEFT adapter directory), got '", spec, "'"));
    }
    o.loras.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
  }
  o.lora_dir = f.GetString("lora-dir", "");
  const int64_t default_loras = !o.loras.empty() ? static_cast<int64_t>(o.loras.size()) : !o.lora_dir.empty() ? 1 : 0;
  ASSIGN_OR_RETURN(const int64_t max_loras, f.GetInt("max-loras", default_loras));
  ASSIGN_OR_RETURN(const int64_t max_lora_rank, f.GetInt("max-lora-rank", 16));
  if (max_loras < 0 || max_loras > 1024 || max_lora_rank < 1 || max_lora_rank > 512) {
    return absl::InvalidArgumentError("--max-loras must be in [0, 1024] and --max-lora-rank in [1, 512]");
  }
  if (max_loras == 0 && (!o.loras.empty() || !o.lora_dir.empty())) {
    return absl::InvalidArgumentError("--lora and --lora-dir need --max-loras of at least 1");
  }
  o.max_loras = static_cast<int32_t>(max_loras);
  o.max_lora_rank = static_cast<int32_t>(max_lora_rank);
  ASSIGN_OR_RETURN(int64_t tensor_parallel, f.GetIntOrAlias("tensor-parallel", "tensor-parallel-size", 1));
  if (tensor_parallel < 1 || tensor_parallel > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensor-parallel must be in [1, 64] (ranks of one replica), got ", tensor_parallel));
  }
  o.tensor_parallel = static_cast<int32_t>(tensor_parallel);
  if (f.Has("fault-tensor-parallel-rank")) {
    const std::string fault = f.GetString("fault-tensor-parallel-rank", "");
    const std::vector<std::string> parts = absl::StrSplit(fault, ':');
    int32_t rank = 0;
    int64_t step = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &rank) || !absl::SimpleAtoi(parts[1], &step) || rank < 0 ||
        rank >= o.tensor_parallel || step < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--fault-tensor-parallel-rank must be RANK:STEP, a rank below "
                       "--tensor-parallel and a step from 1; got '",
                       fault, "'"));
    }
    o.fault_tensor_parallel_rank = {.rank = rank, .at_step = step};
  }
  if (f.Has("max-num-seqs")) {
    ASSIGN_OR_RETURN(int64_t seqs, f.GetInt("max-num-seqs", 0));
    o.max_num_seqs = static_cast<int32_t>(seqs);
  }
  if (f.Has("max-num-batched-tokens")) {
    ASSIGN_OR_RETURN(int64_t batched, f.GetInt("max-num-batched-tokens", 0));
    o.max_num_batched_tokens = static_cast<int32_t>(batched);
  }
  ASSIGN_OR_RETURN(int64_t bypass, f.GetInt("admission-bypass", o.admission_bypass_limit));
  if (bypass < 0 || bypass > 1'000'000) {
    return absl::InvalidArgumentError("--admission-bypass takes a count from 0 (strict arrival order) to 1000000");
  }
  o.admission_bypass_limit = static_cast<int32_t>(bypass);
  // Checked now against the CPU defaults, again once the device is known.
  RETURN_IF_ERROR(ResolveScheduler(o, engine::DeviceKind::kCpu).status());
  ASSIGN_OR_RETURN(int64_t waiting, f.GetInt("max-waiting-requests", o.max_waiting_requests));
  if (waiting < 0) return absl::InvalidArgumentError("--max-waiting-requests must be >= 0 (0: unbounded)");
  o.max_waiting_requests = static_cast<int32_t>(waiting);
  o.enable_prefix_caching = !f.GetSwitch("no-prefix-caching");
  o.free_window_blocks = !f.GetSwitch("keep-window-blocks");
  o.speculation.proposer = f.GetString("speculation", o.speculation.proposer);
  ASSIGN_OR_RETURN(int64_t max_draft, f.GetInt("spec-max-draft-tokens", o.speculation.max_draft_tokens));
  o.speculation.max_draft_tokens = static_cast<int32_t>(max_draft);
  o.speculation.adaptive = !f.GetSwitch("no-spec-adaptive");
  ASSIGN_OR_RETURN(int64_t ngram_min, f.GetInt("spec-ngram-min", o.proposers.ngram.min_n));
  ASSIGN_OR_RETURN(int64_t ngram_max, f.GetInt("spec-ngram-max", o.proposers.ngram.max_n));
  o.proposers.ngram = {.min_n = static_cast<int32_t>(ngram_min), .max_n = static_cast<int32_t>(ngram_max)};
  RETURN_IF_ERROR(o.proposers.ngram.Validate());
  if (f.Has("spec-suffix-store")) {
    ASSIGN_OR_RETURN(o.proposers.suffix.store_bytes, ParseByteSize(f.GetString("spec-suffix-store", "")));
  }
  ASSIGN_OR_RETURN(o.proposers.suffix.max_spec_factor,
                   f.GetDouble("spec-suffix-factor", o.proposers.suffix.max_spec_factor));
  ASSIGN_OR_RETURN(o.proposers.suffix.min_token_prob,
                   f.GetDouble("spec-suffix-min-prob", o.proposers.suffix.min_token_prob));
  if (absl::Status s = o.proposers.suffix.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.message(), " (--spec-suffix-store, --spec-suffix-factor, --spec-suffix-min-prob)"));
  }
  ASSIGN_OR_RETURN(int64_t self_layers, f.GetInt("spec-self-layers", 0));
  if (self_layers < 0) return absl::InvalidArgumentError("--spec-self-layers must be >= 0 (0: not loaded)");
  o.proposers.self_layers = static_cast<int32_t>(self_layers);
  o.proposers.draft_model_path = f.GetString("spec-draft-model", "");
  o.proposers.draft_heads_path = f.GetString("spec-draft-heads", "");
  ASSIGN_OR_RETURN(int64_t heads_top_k, f.GetInt("spec-heads-top-k", 1));
  if (heads_top_k < 1 || heads_top_k > 16) {
    return absl::InvalidArgumentError(
        "--spec-heads-top-k must be in [1, 16] (1: a chain of each head's likeliest token)");
  }
  o.proposers.heads_top_k = static_cast<int32_t>(heads_top_k);
  o.proposers.num_threads = o.threads;
  // proposers.cpu_activations follows the mode chosen at start (worker_mode.h).
  // The default must be one of the proposers these flags load.
  if (absl::Status s = o.speculation.Validate(o.proposers.names()); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.message(),
                     " (--speculation; --spec-self-layers loads \"self\", "
                     "--spec-draft-model loads \"draft\", --spec-draft-heads loads \"heads\")"));
  }
  ASSIGN_OR_RETURN(double drain, f.GetDouble("drain-timeout", 30.0));
  ASSIGN_OR_RETURN(double stall, f.GetDouble("stall-timeout", 60.0));
  if (drain < 0 || stall <= 0) {
    return absl::InvalidArgumentError("--drain-timeout must be >= 0 and --stall-timeout > 0 (seconds)");
  }
  o.drain_timeout = Millis(drain);
  o.stall_timeout = Millis(stall);
  o.cachemanager = f.GetString("cachemanager", "");
  o.worker_id = f.GetString("worker-id", "");
  o.advertise_address = f.GetString("advertise-address", "");
  o.cache_dir = f.GetString("cache-dir", DefaultCacheDir());
  o.kv_transfer_listen = f.GetString("kv-transfer-listen", "");
  ASSIGN_OR_RETURN(double transfer_deadline, f.GetDouble("kv-transfer-deadline", 10.0));
  ASSIGN_OR_RETURN(int64_t transfer_pulls, f.GetInt("kv-transfer-max-pulls", o.kv_transfer_max_pulls));
  if (transfer_deadline <= 0 || transfer_pulls < 1 || transfer_pulls > 1024) {
    return absl::InvalidArgumentError(
        "--kv-transfer-deadline must be > 0 seconds and --kv-transfer-max-pulls in [1, 1024]");
  }
  o.kv_transfer_deadline = Millis(transfer_deadline);
  o.kv_transfer_max_pulls = static_cast<int32_t>(transfer_pulls);
  o.kv_transfer_allowed_peers =
      absl::StrSplit(f.GetString("kv-transfer-allowed-peers", ""), ',', absl::SkipWhitespace());
  o.kv_transfer_tls_name = f.GetString("kv-transfer-tls-name", "");
  if (f.Has("kv-transfer-max-bytes")) {
    ASSIGN_OR_RETURN(o.kv_transfer_max_bytes, ParseByteSize(f.GetString("kv-transfer-max-bytes", "")));
  }
  if (f.Has("kv-transfer-max-peer-bytes")) {
    ASSIGN_OR_RETURN(o.kv_transfer_max_peer_bytes, ParseByteSize(f.GetString("kv-transfer-max-peer-bytes", "")));
  }
  if (o.kv_transfer_max_bytes < 1 || o.kv_transfer_max_peer_bytes < 1) {
    return absl::InvalidArgumentError(
        "--kv-transfer-max-bytes and --kv-transfer-max-peer-bytes must be at least 1 byte");
  }
  o.fault_kv_transfer = f.GetString("fault-kv-transfer", "");
  if (!o.fault_kv_transfer.empty() && o.fault_kv_transfer != "corrupt-chunk" &&
      o.fault_kv_transfer != "truncate-block" && o.fault_kv_transfer != "stall") {
    return absl::InvalidArgumentError("--fault-kv-transfer takes corrupt-chunk, truncate-block or stall");
  }
  const std::string role = f.GetString("role", "both");
  const std::optional<WorkerRole> parsed_role = ParseWorkerRole(role);
  if (!parsed_role.has_value() || role.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--role takes prefill, decode or both, not \"", role, "\""));
  }
  o.role = *parsed_role;
  if (o.role == WorkerRole::kPrefill && o.kv_transfer_listen.empty()) {
    return absl::InvalidArgumentError(
        "--role prefill needs --kv-transfer-listen: decode workers pull a prefill worker's KV from that port");
  }
  ASSIGN_OR_RETURN(double lease_seconds, f.GetDouble("kv-lease-seconds", 30.0));
  if (!(lease_seconds > 0) || lease_seconds > 3600) {
    return absl::InvalidArgumentError("--kv-lease-seconds must be in (0, 3600]");
  }
  o.kv_lease = Millis(lease_seconds);
  return o;
}

absl::StatusOr<engine::SchedulerConfig> ResolveScheduler(const WorkerOptions& o, engine::DeviceKind device) {
  engine::SchedulerConfig config = engine::SchedulerConfig::DefaultsFor(device);
  if (o.max_num_seqs) config.max_num_seqs = *o.max_num_seqs;
  if (o.max_num_batched_tokens) config.max_num_batched_tokens = *o.max_num_batched_tokens;
  config.admission_bypass_limit = o.admission_bypass_limit;
  if (absl::Status s = config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(s.message(), " (--max-num-seqs, --max-num-batched-tokens)"));
  }
  return config;
}

}  // namespace kvfleet::worker
