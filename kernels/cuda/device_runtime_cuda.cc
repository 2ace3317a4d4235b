// device_runtime.h over the CUDA runtime (cudart, linked statically so a
// packed binary needs only the driver on the machine).
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_runtime.h"

namespace kvfleet::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

absl::Status FromCuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  if (e == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice ||
      e == cudaErrorDevicesUnavailable) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

}  // namespace

bool IsEmulated() { return false; }

int DeviceCount(std::string* why_none) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why_none != nullptr) {
      *why_none = absl::StrCat("no usable GPU: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
    }
    cudaGetLastError();  // clear it: nothing else failed
    return 0;
  }
  if (count == 0 && why_none != nullptr) *why_none = "no GPU: the CUDA driver reports no device";
  return count;
}

absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) {
  cudaDeviceProp p{};
  if (absl::Status s = FromCuda(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties"); !s.ok()) return s;
  return DeviceProperties{.name = p.name,
                          .major = p.major,
                          .minor = p.minor,
                          .multiprocessors = p.multiProcessorCount,
                          .total_memory = static_cast<int64_t>(p.totalGlobalMem)};
}

absl::Status SetDevice(int device) { return FromCuda(cudaSetDevice(device), "cudaSetDevice"); }

absl::StatusOr<void*> Malloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return FromCuda(e, absl::StrCat("cudaMalloc of ", bytes, " bytes").c_str());
  }
  return p;
}

void Free(void* device_ptr) {
  if (device_ptr != nullptr) cudaFree(device_ptr);
}

absl::StatusOr<void*> MallocHost(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return FromCuda(e, absl::StrCat("cudaMallocHost of ", bytes, " bytes").c_str());
  }
  return p;
}

void FreeHost(void* host_ptr) {
  if (host_ptr != nullptr) cudaFreeHost(host_ptr);
}

absl::Status MemGetInfo(int64_t* free_bytes, int64_t* total_bytes) {
  size_t free = 0, total = 0;
  if (absl::Status s = FromCuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo"); !s.ok()) return s;
  *free_bytes = static_cast<int64_t>(free);
  *total_bytes = static_cast<int64_t>(total);
  return absl::OkStatus();
}

absl::StatusOr<Stream> CreateStream() {
  cudaStream_t s = nullptr;
  if (absl::Status st = FromCuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); !st.ok()) {
    return st;
  }
  return s;
}

void DestroyStream(Stream stream) {
  if (stream != nullptr) cudaStreamDestroy(stream);
}

absl::Status CopyToDevice(void* dst, const void* src, size_t bytes, Stream stream) {
  return FromCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "copy to the device");
}

absl::Status CopyToHost(void* dst, const void* src, size_t bytes, Stream stream) {
  return FromCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), "copy to the host");
}

absl::Status CopyOnDevice(void* dst, const void* src, size_t bytes, Stream stream) {
  return FromCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "copy on the device");
}

absl::Status Memset(void* dst, int value, size_t bytes, Stream stream) {
  return FromCuda(cudaMemsetAsync(dst, value, bytes, stream), "cudaMemsetAsync");
}

absl::Status Synchronize(Stream stream) { return FromCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }

absl::Status CheckLaunches(const char* what) { return FromCuda(cudaGetLastError(), what); }

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::cuda
