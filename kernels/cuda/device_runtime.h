// Host-side calls into the CUDA runtime as absl::Status: devices, memory,
// copies, streams, and the launch error check. Two implementations share
// this header: device_runtime_cuda.cc (cudart) and
// emulation/device_runtime_emulated.cc (host memory; launches run inline),
// so the CUDA executor's code is the same in both builds. The emulated
// device has 8 GiB.
//
// Out-of-memory is RESOURCE_EXHAUSTED with the sizes; other CUDA errors are
// INTERNAL (or UNAVAILABLE for a missing or unusable device) with the CUDA
// error's name, so a worker can say what went wrong and what to do.
//
//   ASSIGN_OR_RETURN(void* p, cuda::Malloc(bytes));
//   RETURN_IF_ERROR(cuda::CopyToDevice(p, host, bytes, stream));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/stream.h"

namespace kvfleet::cuda {
inline namespace KVFLEET_CUDA_BUILD {

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;   // compute capability
  int multiprocessors = 0;
  int64_t total_memory = 0;
};

// True in the emulated build.
bool IsEmulated();
// The usable devices; 0 and a reason (no driver, no device) otherwise.
int DeviceCount(std::string* why_none);
absl::StatusOr<DeviceProperties> GetDeviceProperties(int device);
// Makes `device` current for the calling thread.
absl::Status SetDevice(int device);

absl::StatusOr<void*> Malloc(size_t bytes);
void Free(void* device_ptr);
// Page-locked host memory, for copies that overlap compute.
absl::StatusOr<void*> MallocHost(size_t bytes);
void FreeHost(void* host_ptr);
// Free and total bytes of the current device.
absl::Status MemGetInfo(int64_t* free_bytes, int64_t* total_bytes);

absl::StatusOr<Stream> CreateStream();
void DestroyStream(Stream stream);
absl::Status CopyToDevice(void* dst, const void* src, size_t bytes, Stream stream);
absl::Status CopyToHost(void* dst, const void* src, size_t bytes, Stream stream);
absl::Status CopyOnDevice(void* dst, const void* src, size_t bytes, Stream stream);
absl::Status Memset(void* dst, int value, size_t bytes, Stream stream);
absl::Status Synchronize(Stream stream);
// The first error of any launch since the last check (launch configuration
// errors, and faults of kernels that already ran), naming `what`.
absl::Status CheckLaunches(const char* what);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::cuda
