// What an executor is asked for: the device it runs on, its KV cache
// geometry and the largest batch it must take (which sizes every scratch
// buffer once, at creation).
//
//   ASSIGN_OR_RETURN(Device d, ParseDevice("cuda:1"));
//   ExecutorOptions o{.device = d, .block_size = 16, .limits = {.max_batch_tokens = 8192}};
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/executor/key_channel_scales.h"
#include "kernels/common/kv_format.h"

namespace kvfleet::engine {

enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // GPU ordinal; 0 for the CPU

  std::string ToString() const;  // "cpu", "cuda:0"
  bool operator==(const Device&) const = default;
};

// "cpu", "cuda" (= cuda:0) or "cuda:N". "auto" is not a device: the
// factory's ResolveDevice turns it into one.
absl::StatusOr<Device> ParseDevice(std::string_view text);

// How the CPU backend feeds activations to quantized weights: float32
// (every weight dequantized to float) or 8-bit per 32-value block with
// integer dot products (kernels/cpu/matmul_q8.h). The two give different
// tokens, so each has its own numerics identity.
enum class CpuActivations { kF32, kQ8 };

// "f32" or "q8"; INVALID_ARGUMENT naming both otherwise.
absl::StatusOr<CpuActivations> ParseCpuActivations(std::string_view text);
std::string_view CpuActivationsName(CpuActivations activations);  // "f32" or "q8"

// "f16", "int8", "int8_rotated", "int8_rotated_scaled", "fp8_e4m3" (or
// "fp8"): the KV cache's element format (kernels/common/kv_format.h);
// INVALID_ARGUMENT naming them otherwise.
absl::StatusOr<kernels::KvCacheDtype> ParseKvCacheDtype(std::string_view text);

struct ExecutorLimits {
  int32_t max_batch_tokens = 512;  // tokens of one Forward, all chunks together
  int32_t max_batch_chunks = 64;   // chunks of one Forward
  int32_t max_logits_rows = 0;     // 0: max_batch_tokens

  int32_t logits_rows() const { return max_logits_rows > 0 ? max_logits_rows : max_batch_tokens; }
  absl::Status Validate() const;
};

// LoRA adapters an executor holds resident at once (ModelExecutor::LoadLora).
struct LoraLimits {
  int32_t max_loras = 0;  // slots; 0: no adapters
  int32_t max_rank = 16;  // the largest rank a slot takes: what the memory plan reserves per slot
};

struct TensorParallelRankFault {
  int32_t rank = -1;  // -1: none
  int64_t at_step = 0;
};

struct ExecutorOptions {
  Device device;
  int64_t num_blocks = 0;                                 // KV capacity in blocks; 0: none yet (AllocateKvCache later)
  int64_t block_size = 16;                                // tokens per block
  int num_threads = 0;                                    // CPU backend: 0 is one per hardware thread
  CpuActivations cpu_activations = CpuActivations::kF32;  // CPU backend only
  // 8-bit formats hold about twice the tokens; each is its own numerics.
  kernels::KvCacheDtype kv_cache_dtype = kernels::KvCacheDtype::kF16;
  // int8_rotated_scaled's per-channel key scales (from the model's
  // calibration record); required by that format, unused by the others.
  std::shared_ptr<const KeyChannelScales> key_channel_scales;
  // Sliding-window layers get their own pages, which the engine frees once
  // their window has passed (model/arch/kv_page_groups.h). Off: one page
  // holds every layer of a block, as for a model without windows.
  bool free_window_blocks = true;
  // Ranks of one tensor-parallel replica (model/arch/shard_plan.h); 1: the
  // model runs whole. The CPU runs the ranks as threads that take turns
  // (tensor_parallel_executor.h, cpu/cpu_ranks.h).
  int32_t tensor_parallel = 1;
  // For chaos tests (kvfleet-worker --fault-tensor-parallel-rank R:N):
  // rank R fails its N-th forward pass (from 1) as a device error would.
  TensorParallelRankFault rank_fault;
  LoraLimits lora;
  ExecutorLimits limits;

  absl::Status Validate() const;
};

}  // namespace kvfleet::engine
