// CudaRanks over NCCL: the GPU build only (the emulation's ranks take turns).
#include "absl/strings/str_cat.h"
#include "engine/executor/cuda/cuda_ranks.h"
#include "engine/executor/cuda/nccl_collective.h"
#include "kernels/cuda/device_runtime.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

absl::StatusOr<std::unique_ptr<CudaRanks>> CudaRanks::OverNccl(int first_device, int32_t degree) {
  std::string why;
  const int count = ::kvfleet::cuda::DeviceCount(&why);
  if (first_device + degree > count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--tensor-parallel ", degree, " from cuda:", first_device, " needs GPUs cuda:", first_device,
        "..cuda:", first_device + degree - 1, ", but ", count == 0 ? why : absl::StrCat("this machine has ", count),
        "; split across fewer GPUs, or run the ranks with --device cpu"));
  }
  std::vector<int> devices;
  for (int32_t r = 0; r < degree; ++r) devices.push_back(first_device + r);
  auto group = NcclCollective::CreateGroup(devices);
  if (!group.ok()) return group.status();
  std::unique_ptr<CudaRanks> ranks(new CudaRanks());
  for (auto& rank : *group) ranks->nccl_.push_back(std::move(rank));
  return ranks;
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
