// kvfleet capacity: what a model costs in memory and how many conversations
// a device budget serves (the arithmetic is tools/capacity/).
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/byte_size.h"
#include "common/cache_dir.h"
#include "common/status_macros.h"
#include "engine/calibration/calibration_record.h"
#include "engine/calibration/mode_choice.h"
#include "engine/executor/executor_factory.h"
#include "model/arch/shard_plan.h"
#include "model/model.h"
#include "model/model_fingerprint.h"
#include "tools/capacity/capacity_plan.h"
#include "tools/kvfleet/commands.h"

namespace kvfleet::tools {
namespace {

constexpr char kUsage[] =
    R"usage(usage: kvfleet capacity --model PATH [--device-memory SIZE] [--devices N] [--tensor-parallel N]
                        [--memory-utilization F] [--overhead SIZE] [--kv-cache-memory SIZE]
                        [--kv-dtype auto|f16|bf16|fp8|int8|int8_rotated|int8_rotated_scaled|f32] [--calibration PATH] [--device cpu|cuda]
                        [--block-size N] [--context N] [--concurrency N]
                        [--weight-dtype f32|bf16|f16|fp8|q8_0|q6_k|q5_0|q4_k|q4_0]
                        [--kv-host-memory SIZE] [--kv-disk-size SIZE]

Plans memory for --model: a GGUF file, a Hugging Face checkpoint directory,
or a bare config.json (its weights then estimated from the config at
--weight-dtype, default bf16). Prints the weight bytes, the KV cache a
token costs (2 × layers × KV heads × head dim × bytes per value), the KV
blocks that fit and the conversations of --context tokens they hold (or, with
--concurrency, the longest context that many conversations can each have).

Counted as the worker allocates: one model replica per device, blocks of
--block-size (default 16), every layer kept at full context except a
sliding-window model's windowed layers, which keep only the blocks their
window reaches (the saving is shown; the cache is then counted in pages,
a block of a few layers each, as the worker's pool is). The KV budget of
a device is --memory-utilization (default 0.9) × --device-memory, less the
weights and --overhead (default 1GiB: CUDA context, cuBLAS workspace and
activations, which the worker measures at start); or --kv-cache-memory,
which means what the worker's flag does and gives the worker's block count.
With --kv-host-memory and --kv-disk-size (the worker's flags), it also
counts the conversations those tiers keep for reuse below the device.
--tensor-parallel N (or --tensor-parallel-size) plans replicas of N devices
each out of --devices: each rank holds its shard of the weights and its KV
heads' share of every block (a KV head replicated when there are fewer
than ranks), and the budget, blocks and weights shown are a rank's (the
largest). A degree that cannot split the model is refused, naming the
tensor and the degrees that can.
--kv-dtype auto (the default) counts the KV format a worker on --device
(cpu, the default, or cuda) would run with its default flags: the one the
model's calibration record (beside the model, or --calibration) chooses
for that backend, else f16 (docs/operations.md, "Choosing a mode"). The
records kvfleet keeps are measured on the CPU, so a cuda worker runs f16.

  kvfleet capacity --model models/qwen2.5-coder-1.5b-instruct.Q4_K_M.gguf --device-memory 24GiB --context 8000
  kvfleet capacity --model config.json --device-memory 141GB --context 8000 --concurrency 16
  kvfleet capacity --model config.json --device-memory 141GB --devices 8 --tensor-parallel 4 --context 8000
)usage";

// Where a tensor-parallel split must fall: from the file's tensor types,
// or --weight-dtype's for a bare config.
model::ShardAlignment AlignmentOf(const model::Model& m, const std::string& weight_dtype) {
  if (!m.source().tensors().empty()) return model::ShardAlignmentOf(m.source().tensors());
  model::ShardAlignment a;
  const std::string d = absl::AsciiStrToUpper(weight_dtype);
  if (d == "Q4_K" || d == "Q6_K") {
    a.attn_output = a.ffn_down = 256;
    a.attn_output_dtype = a.ffn_down_dtype = d;
  }
  return a;
}

// Bits a parameter takes at each storage type (a K-quant's scales included).
absl::StatusOr<double> BitsPerWeight(const std::string& dtype) {
  const std::string d = absl::AsciiStrToLower(dtype);
  if (d == "f32") return 32.0;
  if (d == "bf16" || d == "f16") return 16.0;
  if (d == "fp8") return 8.0;
  if (d == "q8_0") return 8.5;
  if (d == "q6_k") return 6.5625;
  if (d == "q5_0") return 5.5;
  if (d == "q4_k" || d == "q4_0") return 4.5;
  return absl::InvalidArgumentError(
      absl::StrCat("--weight-dtype ", dtype, " is not one of f32, bf16, f16, fp8, q8_0, q6_k, q5_0, q4_k, q4_0"));
}

// A worker's formats (kv_format.h), and two that other engines use.
absl::StatusOr<int64_t> KvBytesPerValue(const std::string& dtype) {
  const std::string d = absl::AsciiStrToLower(dtype);
  if (absl::StatusOr<kernels::KvCacheDtype> kv = engine::ParseKvCacheDtype(d); kv.ok()) {
    return kernels::KvElementBytes(*kv);
  }
  if (d == "bf16") return 2;
  if (d == "f32") return 4;
  return absl::InvalidArgumentError(absl::StrCat("--kv-dtype ", dtype,
                                                 " is not one of auto, f16, bf16, fp8 (fp8_e4m3), int8, int8_rotated, "
                                                 "int8_rotated_scaled, f32"));
}

// Decimal and binary, as device makers and tools each write them.
std::string Bytes(int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes >= 1000 * 1000 * 1000) return absl::StrFormat("%.2f GB (%.2f GiB)", b / 1e9, b / (1 << 30));
  return absl::StrFormat("%.1f MB (%.1f MiB)", b / 1e6, b / (1 << 20));
}

void Row(const std::string& label, const std::string& text) {
  std::printf("%-21s%s\n", label.empty() ? "" : (label + ":").c_str(), text.c_str());
}

std::string Count(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace

absl::Status RunCapacity(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args,
                                             {"model", "device-memory", "devices", "memory-utilization", "overhead",
                                              "kv-cache-memory", "kv-dtype", "block-size", "kv-host-memory",
                                              "kv-disk-size", "context", "concurrency", "weight-dtype", "calibration",
                                              "device", "tensor-parallel", "tensor-parallel-size"},
                                             {}));
  ASSIGN_OR_RETURN(std::string path, flags.GetString("model"));
  ASSIGN_OR_RETURN(auto model, model::Model::Load(path, {.weights = false, .vocabulary = false}));
  const model::ModelConfig& c = model->config();

  CapacityInput in{.config = &c};
  const bool bare_config = model->source().tensors().empty();
  if (bare_config) {
    ASSIGN_OR_RETURN(double bits, BitsPerWeight(flags.GetString("weight-dtype", "bf16")));
    in.weight_bytes = static_cast<int64_t>(static_cast<double>(EstimateParameters(c)) * bits / 8.0);
  } else {
    if (!flags.GetString("weight-dtype", "").empty()) {
      return absl::InvalidArgumentError("--weight-dtype is for a bare config.json; a model with weights is measured");
    }
    for (const model::TensorView& t : model->source().tensors()) in.weight_bytes += t.num_bytes;
  }
  std::string kv_dtype = flags.GetString("kv-dtype", "auto");
  std::string kv_choice;  // why, when "auto" chose it
  if (kv_dtype == "auto") {
    const std::string backend = flags.GetString("device", "cpu");
    if (backend != "cpu" && backend != "cuda") {
      return absl::InvalidArgumentError(absl::StrCat("--device must be cpu or cuda, not '", backend, "'"));
    }
    std::unique_ptr<model::Model> weighed;
    ASSIGN_OR_RETURN(
        const engine::ChosenMode mode,
        engine::ResolveMode({.record_path = flags.GetString("calibration", engine::CalibrationPathFor(path)),
                             .record_required = flags.Has("calibration"),
                             .backend = backend,
                             .fingerprint = [&]() -> std::string {
                               // The fingerprint hashes the weights: load them (mapped) only now.
                               if (bare_config) return "";
                               auto loaded = model::Model::Load(path, {.vocabulary = false});
                               if (!loaded.ok()) return "";
                               weighed = std::move(*loaded);
                               return model::CachedModelFingerprint(*weighed, DefaultCacheDir());
                             },
                             .numerics_of = engine::CpuNumerics}));
    kv_dtype = std::string(kernels::KvCacheDtypeName(mode.kv));
    kv_choice = mode.reason;
  }
  ASSIGN_OR_RETURN(in.kv_bytes_per_value, KvBytesPerValue(kv_dtype));
  // kvfleet's int8 caches keep a binary16 scale per token and KV head (kernels/common/kv_format.h).
  const absl::StatusOr<kernels::KvCacheDtype> kvfleet_dtype =
      engine::ParseKvCacheDtype(absl::AsciiStrToLower(kv_dtype));
  in.kv_row_scale_bytes = kvfleet_dtype.ok() ? kernels::KvRowScaleBytes(*kvfleet_dtype) : 0;
  ASSIGN_OR_RETURN(in.block_size, flags.GetInt("block-size", in.block_size));
  ASSIGN_OR_RETURN(in.devices, flags.GetInt("devices", in.devices));
  ASSIGN_OR_RETURN(int64_t tp, flags.GetInt("tensor-parallel", 1));
  if (flags.Has("tensor-parallel-size")) {
    ASSIGN_OR_RETURN(tp, flags.GetInt("tensor-parallel-size", 1));
  }
  if (tp < 1 || tp > 1024) return absl::InvalidArgumentError("--tensor-parallel must be in [1, 1024]");
  in.tensor_parallel = static_cast<int32_t>(tp);
  if (!flags.Has("devices")) in.devices = tp;  // one replica unless told otherwise
  in.alignment = AlignmentOf(*model, flags.GetString("weight-dtype", "bf16"));
  ASSIGN_OR_RETURN(in.memory_utilization, flags.GetDouble("memory-utilization", in.memory_utilization));
  ASSIGN_OR_RETURN(in.context, flags.GetInt("context", 0));
  ASSIGN_OR_RETURN(in.concurrency, flags.GetInt("concurrency", 0));
  if (flags.Has("kv-host-memory")) {
    ASSIGN_OR_RETURN(in.host_tier_bytes, ParseByteSize(flags.GetString("kv-host-memory", "")));
  }
  if (flags.Has("kv-disk-size")) {
    ASSIGN_OR_RETURN(in.disk_tier_bytes, ParseByteSize(flags.GetString("kv-disk-size", "")));
  }
  const std::string kv_memory = flags.GetString("kv-cache-memory", "");
  if (!kv_memory.empty()) {
    ASSIGN_OR_RETURN(int64_t budget, ParseByteSize(kv_memory));
    in.kv_budget_bytes = budget;
  }
  const std::string device_memory = flags.GetString("device-memory", "");
  if (!device_memory.empty()) {
    ASSIGN_OR_RETURN(in.device_memory_bytes, ParseByteSize(device_memory));
  }
  ASSIGN_OR_RETURN(in.overhead_bytes, ParseByteSize(flags.GetString("overhead", "1GiB")));
  ASSIGN_OR_RETURN(CapacityPlan plan, PlanCapacity(in));

  Row("model", absl::StrFormat("%s (%s, %d layers, %d KV heads of %d, context %s)", path, c.architecture, c.num_layers,
                               c.num_kv_heads, c.head_dim, Count(c.context_length)));
  Row("weights", Bytes(in.weight_bytes) +
                     (bare_config ? absl::StrFormat(", estimated: %s parameters at %s", Count(EstimateParameters(c)),
                                                    flags.GetString("weight-dtype", "bf16"))
                                  : ""));
  Row("KV per token",
      absl::StrFormat("%s bytes (2 × %d layers × %d KV heads × (%d × %d bytes%s), %s)", Count(plan.kv_bytes_per_token),
                      c.num_layers, c.num_kv_heads, c.head_dim, in.kv_bytes_per_value,
                      in.kv_row_scale_bytes > 0 ? absl::StrCat(" + a ", in.kv_row_scale_bytes, "-byte scale") : "",
                      kv_dtype));
  if (!kv_choice.empty()) Row("", absl::StrCat("KV format chosen by --kv-dtype auto: ", kv_choice));
  if (in.tensor_parallel > 1) {
    Row("tensor parallel",
        absl::StrFormat("%s: %d replica%s of %d devices; per rank (the largest): %s of weights, %d of %d KV heads, "
                        "%s KV bytes per token",
                        plan.shards, plan.replicas, plan.replicas == 1 ? "" : "s", in.tensor_parallel,
                        Bytes(plan.weight_bytes_per_rank), plan.kv_heads_per_rank, c.num_kv_heads,
                        Count(plan.kv_bytes_per_token_per_rank)));
  }
  Row("KV per conversation",
      absl::StrFormat("%s for %s tokens (%s blocks of %d)%s", Bytes(plan.kv_bytes_per_conversation),
                      Count(plan.context), Count(plan.blocks_per_conversation), in.block_size,
                      in.tensor_parallel > 1 ? " on the largest rank" : ""));
  if (plan.has_windows) {
    const double saved = 1.0 - static_cast<double>(plan.kv_bytes_per_conversation) /
                                   static_cast<double>(plan.every_block_kv_bytes_per_conversation);
    Row("",
        absl::StrFormat("%.0f%% less than keeping every block (%s): the %d windowed layers (window %s) keep "
                        "only the blocks their window reaches; pages of %d layers, %s a conversation",
                        100.0 * saved, Bytes(plan.every_block_kv_bytes_per_conversation), c.windowed_layers(),
                        Count(c.max_window()), plan.page_groups.layers_per_page, Count(plan.pages_per_conversation)));
  }
  if (in.concurrency > 0) {
    Row(absl::StrCat("KV for ", in.concurrency, " at once"), Bytes(plan.kv_bytes_for_concurrency));
  }
  if (in.kv_budget_bytes.has_value()) {
    Row("KV budget", absl::StrFormat("%s per device (--kv-cache-memory %s)", Bytes(plan.kv_budget_bytes), kv_memory));
  } else {
    Row("KV budget", absl::StrFormat("%s per device (%g × %s, less the weights%s and %s overhead)",
                                     Bytes(plan.kv_budget_bytes), in.memory_utilization, device_memory,
                                     in.tensor_parallel > 1 ? " of a rank" : "", Bytes(in.overhead_bytes)));
    if (!plan.weights_fit) {
      Row("",
          "the weights and overhead do not fit one device: use a larger device, a smaller quantization or "
          "more tensor-parallel ranks (--tensor-parallel)");
    }
  }
  if (plan.has_windows) {
    Row("KV pages", absl::StrFormat("%s per device (a block of %d layers each)", Count(plan.num_blocks),
                                    plan.page_groups.layers_per_page));
  } else {
    Row("KV blocks", absl::StrFormat("%s per device (%s tokens)", Count(plan.num_blocks), Count(plan.tokens)));
  }
  Row("conversations", absl::StrFormat("%s of %s tokens at once on %d device%s", Count(plan.conversations_that_fit),
                                       Count(plan.context), in.devices, in.devices == 1 ? "" : "s"));
  if (in.concurrency > 0) {
    Row(absl::StrCat("at concurrency ", in.concurrency),
        absl::StrFormat("%s; each can reach %s tokens%s", plan.concurrency_fits ? "fits" : "does NOT fit",
                        Count(plan.longest_context),
                        plan.longest_context_capped ? " (the model's context length)" : ""));
  }
  if (in.host_tier_bytes > 0 || in.disk_tier_bytes > 0) {
    Row("kept below", absl::StrFormat("%s conversations in host memory, %s on disk, for reuse (loaded back on a "
                                      "prefix hit instead of recomputed; they do not run from there)",
                                      Count(plan.host_tier_conversations), Count(plan.disk_tier_conversations)));
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
