#include "engine/executor/executor_factory.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/executor/cpu/cpu_executor.h"
#include "engine/executor/cpu/cpu_ranks.h"
#include "engine/executor/tensor_parallel_executor.h"
#if KVFLEET_HAS_CUDA
#include "engine/executor/cuda/cuda_executor.h"
#include "engine/executor/cuda/cuda_ranks.h"
#include "engine/executor/cuda/nccl_library.h"
#include "kernels/cuda/device_runtime.h"
#endif

namespace kvfleet::engine {

int CudaDeviceCount(std::string* why_none) {
#if KVFLEET_HAS_CUDA
  return CudaExecutor::DeviceCount(why_none);
#else
  if (why_none != nullptr) *why_none = "this build has no CUDA backend (nvcc was not found when it was configured)";
  return 0;
#endif
}

std::vector<GpuDescription> DescribeCudaDevices(std::string* why_none) {
  std::vector<GpuDescription> gpus;
#if KVFLEET_HAS_CUDA
  const int count = CudaDeviceCount(why_none);
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<cuda::DeviceProperties> p = cuda::GetDeviceProperties(i);
    if (!p.ok()) {
      if (why_none != nullptr && gpus.empty()) *why_none = std::string(p.status().message());
      continue;
    }
    gpus.push_back({.index = i,
                    .name = p->name,
                    .major = p->major,
                    .minor = p->minor,
                    .multiprocessors = p->multiprocessors,
                    .total_memory = p->total_memory});
  }
#else
  CudaDeviceCount(why_none);
#endif
  return gpus;
}

absl::StatusOr<std::string> DescribeNccl() {
#if KVFLEET_HAS_CUDA
  ASSIGN_OR_RETURN(const NcclLibrary* nccl, NcclLibrary::Load());
  const int v = nccl->version();
  // NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9.
  return absl::StrCat("NCCL ", v / 10000, ".", v / 100 % 100, ".", v % 100, " (", nccl->path(), ")");
#else
  return absl::FailedPreconditionError(
      "this build has no CUDA backend (nvcc was not found when it was configured), so it never loads NCCL");
#endif
}

absl::StatusOr<std::unique_ptr<ModelExecutor>> CreateExecutor(const model::Model& model,
                                                              const ExecutorOptions& options) {
  if (options.device.kind == DeviceKind::kCpu) {
    if (options.tensor_parallel > 1) {
      ASSIGN_OR_RETURN(std::unique_ptr<TensorParallelExecutor> tp,
                       TensorParallelExecutor::Create(model, options, std::make_unique<CpuRanks>(options.num_threads)));
      return std::unique_ptr<ModelExecutor>(std::move(tp));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutor> ex, CpuExecutor::Create(model, options));
    return std::unique_ptr<ModelExecutor>(std::move(ex));
  }
#if KVFLEET_HAS_CUDA
  if (options.tensor_parallel > 1) {
    // A GPU a rank, meeting over NCCL (not yet run on GPUs: docs/design.md).
    ASSIGN_OR_RETURN(std::unique_ptr<CudaRanks> ranks,
                     CudaRanks::OverNccl(options.device.index, options.tensor_parallel));
    ASSIGN_OR_RETURN(std::unique_ptr<TensorParallelExecutor> tp,
                     TensorParallelExecutor::Create(model, options, std::move(ranks)));
    return std::unique_ptr<ModelExecutor>(std::move(tp));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutor> ex, CudaExecutor::Create(model, options));
  return std::unique_ptr<ModelExecutor>(std::move(ex));
#else
  return absl::FailedPreconditionError(
      absl::StrCat("device ", options.device.ToString(),
                   " asked for, but this build has no CUDA backend (nvcc was not found when it was configured); "
                   "use --device cpu, or rebuild on a machine with the CUDA toolkit"));
#endif
}

std::string CpuNumerics(CpuActivations activations, kernels::KvCacheDtype kv) {
  return CpuNumericsFor(activations, kv);
}

absl::StatusOr<Device> ResolveDevice(std::string_view spec) {
  if (spec != "auto") {
    ASSIGN_OR_RETURN(Device device, ParseDevice(spec));
    if (device.kind == DeviceKind::kCuda) {
      // Asked for by name: say at once when it is not there, before any
      // model is read for it.
      std::string why;
      const int count = CudaDeviceCount(&why);
      if (device.index >= count) {
        return absl::FailedPreconditionError(
            count == 0 ? absl::StrCat(device.ToString(), " asked for, but ", why, "; use --device cpu")
                       : absl::StrCat(device.ToString(), " asked for, but this machine has ", count,
                                      " GPU(s) (cuda:0 .. cuda:", count - 1, "); use one of them or --device cpu"));
      }
    }
    return device;
  }
  std::string why;
  if (CudaDeviceCount(&why) > 0) {
    KVFLEET_LOG_INFO("device auto: cuda:0 (a usable GPU)");
    return Device{.kind = DeviceKind::kCuda, .index = 0};
  }
  KVFLEET_LOG_INFO("device auto: cpu ({})", why);
  return Device{};
}

}  // namespace kvfleet::engine
