// One GPU rank's side of its replica's collectives, over NCCL's
// data-movement calls (nccl_library.h), with the sum kvfleet's own:
//   - AllReduce: the message cut into one chunk a rank; each rank sends
//     every other rank its chunk of x and receives theirs of its own (NCCL
//     send/receive in one group: an all-to-all), sums its chunk in rank
//     order on the device (kernels/cuda/rank_sum.h), then the chunks are
//     all-gathered back into x. Each rank sends 2(N − 1)/N of the message,
//     as NCCL's ring all-reduce does, and NCCL adds nothing.
//   - AllGather: the widths first (one int64 a rank), then each rank's
//     columns padded to the widest and all-gathered, and laid side by side.
// Calls are synchronous on the host (the caller's stream was synchronized;
// this rank's own stream is before returning), which costs a device
// round trip a collective: the first version, to be overlapped later.
//
// Not run on a GPU yet: no machine with GPUs has been lent (see
// scripts/gpu_check.sh). Only the GPU build has it.
//
// Thread-safety: each rank's object from its own thread; the ranks at once.
#pragma once

#include <nccl.h>

#include <atomic>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/collective.h"
#include "engine/executor/cuda/nccl_library.h"
#include "kernels/cuda/device_buffer.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

class NcclCollective : public Collective {
 public:
  // One communicator a device, rank r on devices[r] (ncclCommInitAll).
  static absl::StatusOr<std::vector<std::unique_ptr<NcclCollective>>> CreateGroup(const std::vector<int>& devices);
  ~NcclCollective() override;

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  void AllReduce(float* x, int64_t count) override;
  void AllGather(float* x, int64_t rows, int64_t width) override;
  absl::Status status() const override;
  void Abort() override;

 private:
  NcclCollective(const NcclLibrary& nccl, ncclComm_t comm, int device, int32_t rank, int32_t size)
      : nccl_(nccl), comm_(comm), device_(device), rank_(rank), size_(size) {}

  // Records the first failure; true while none.
  bool Check(ncclResult_t result, const char* what);
  bool Check(const absl::Status& status);
  // `buffer` with room for `bytes` (grown, never shrunk).
  bool Reserve(::kvfleet::cuda::DeviceBuffer& buffer, size_t bytes);

  const NcclLibrary& nccl_;
  ncclComm_t comm_;
  int device_;
  int32_t rank_, size_;
  ::kvfleet::cuda::Stream stream_ = nullptr;
  ::kvfleet::cuda::DeviceBuffer received_, staged_, gathered_;
  absl::Status status_;  // this rank's thread's first failure
  std::atomic<bool> aborted_{false};
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
