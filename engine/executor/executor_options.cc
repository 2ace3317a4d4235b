#include "engine/executor/executor_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/lora_segment.h"

namespace kvfleet::engine {

std::string Device::ToString() const {
  return kind == DeviceKind::kCpu ? std::string("cpu") : absl::StrCat("cuda:", index);
}

std::string_view CpuActivationsName(CpuActivations a) { return a == CpuActivations::kQ8 ? "q8" : "f32"; }

absl::StatusOr<CpuActivations> ParseCpuActivations(std::string_view text) {
  if (text == "f32") return CpuActivations::kF32;
  if (text == "q8") return CpuActivations::kQ8;
  return absl::InvalidArgumentError(absl::StrCat("--cpu-activations must be f32 or q8, not '", std::string(text), "'"));
}

absl::StatusOr<kernels::KvCacheDtype> ParseKvCacheDtype(std::string_view text) {
  if (text == "f16") return kernels::KvCacheDtype::kF16;
  if (text == "int8") return kernels::KvCacheDtype::kInt8;
  if (text == "fp8_e4m3" || text == "fp8") return kernels::KvCacheDtype::kFp8E4M3;
  if (text == "int8_rotated") return kernels::KvCacheDtype::kInt8Rotated;
  if (text == "int8_rotated_scaled") return kernels::KvCacheDtype::kInt8RotatedScaled;
  return absl::InvalidArgumentError(
      absl::StrCat("--kv-cache-dtype must be f16, int8, int8_rotated, int8_rotated_scaled or fp8_e4m3, not '",
                   std::string(text), "'"));
}

absl::StatusOr<Device> ParseDevice(std::string_view view) {
  const std::string text(view);  // this abseil's string_view is not std's
  if (text == "cpu") return Device{};
  if (text == "cuda") return Device{.kind = DeviceKind::kCuda, .index = 0};
  int index = -1;
  if (text.rfind("cuda:", 0) == 0 && absl::SimpleAtoi(text.substr(5), &index) && index >= 0) {
    return Device{.kind = DeviceKind::kCuda, .index = index};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", text, "': use auto, cpu, cuda or cuda:N (N a GPU ordinal)"));
}

absl::Status ExecutorLimits::Validate() const {
  if (max_batch_tokens < 1) return absl::InvalidArgumentError("max_batch_tokens must be positive");
  if (max_batch_chunks < 1 || max_batch_chunks > max_batch_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_batch_chunks must be in [1, max_batch_tokens = ", max_batch_tokens, "], got ", max_batch_chunks));
  }
  if (max_logits_rows < 0 || max_logits_rows > max_batch_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_logits_rows must be in [0, max_batch_tokens = ", max_batch_tokens, "], got ", max_logits_rows));
  }
  return absl::OkStatus();
}

absl::Status ExecutorOptions::Validate() const {
  if (cpu_activations == CpuActivations::kQ8 && device.kind != DeviceKind::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu-activations q8 applies to the CPU backend; this model runs on ", device.ToString(),
                     " (drop the flag, or give --device cpu)"));
  }
  if (num_blocks < 0) return absl::InvalidArgumentError("num_blocks must be >= 0");
  if (block_size <= 0 || block_size > 1024) return absl::InvalidArgumentError("block_size must be in [1, 1024]");
  if (num_threads < 0) return absl::InvalidArgumentError("num_threads must be >= 0");
  if (tensor_parallel < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tensor-parallel is the number of ranks a model is split across, at least 1; got ", tensor_parallel));
  }
  if (kernels::KvScalesKeyChannels(kv_cache_dtype) && key_channel_scales == nullptr) {
    return absl::InvalidArgumentError(
        "the int8_rotated_scaled KV cache needs the model's key channel scales, which its calibration record "
        "holds (kvfleet eval --calibrate writes them; pass the record with --calibration)");
  }
  if (lora.max_loras < 0 || lora.max_loras > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--max-loras must be in [0, 1024], got ", lora.max_loras));
  }
  if (lora.max_rank < 1 || lora.max_rank > kernels::kMaxLoraRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-lora-rank must be in [1, ", kernels::kMaxLoraRank, "], got ", lora.max_rank));
  }
  return limits.Validate();
}

}  // namespace kvfleet::engine
