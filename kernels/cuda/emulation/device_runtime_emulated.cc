// device_runtime.h for the host emulation: device memory is host memory
// (tracked against 8 GiB a device), copies are memcpy, and launches have
// already run by the time they return, so streams have nothing to wait for.
// There are kEmulatedDevices devices, so that a tensor-parallel replica's
// ranks can each take one; SetDevice picks the calling thread's, as
// cudaSetDevice does, and memory is counted against it.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/device_runtime.h"
#include "kernels/cuda/emulation/emulated_cuda.h"

namespace kvfleet::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

constexpr int64_t kDeviceBytes = int64_t{8} << 30;
constexpr int kEmulatedDevices = 4;

struct Allocation {
  size_t bytes = 0;
  int device = 0;
};

struct Allocations {
  std::mutex mu;
  std::unordered_map<void*, Allocation> sizes;
  int64_t used[kEmulatedDevices] = {};
};

Allocations& Tracked() {
  static Allocations* a = new Allocations();
  return *a;
}

thread_local int current_device = 0;

}  // namespace

bool IsEmulated() { return true; }

int DeviceCount(std::string*) { return kEmulatedDevices; }

absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) {
  if (device < 0 || device >= kEmulatedDevices) {
    return absl::UnavailableError(
        absl::StrCat("the emulation has ", kEmulatedDevices, " devices, not device ", device));
  }
  return DeviceProperties{.name = "emulated CUDA device (host)",
                          .major = 0,
                          .minor = 0,
                          .multiprocessors = 1,
                          .total_memory = kDeviceBytes};
}

absl::Status SetDevice(int device) {
  RETURN_IF_ERROR(GetDeviceProperties(device).status());
  current_device = device;
  return absl::OkStatus();
}

absl::StatusOr<void*> Malloc(size_t bytes) {
  Allocations& a = Tracked();
  std::lock_guard<std::mutex> lock(a.mu);
  int64_t& used = a.used[current_device];
  if (used + static_cast<int64_t>(bytes) > kDeviceBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("cudaMalloc of ", bytes, " bytes: cudaErrorMemoryAllocation (",
                                                     kDeviceBytes - used, " bytes free on emulated device ",
                                                     current_device, ")"));
  }
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("no host memory for ", bytes, " bytes"));
  a.sizes[p] = {.bytes = bytes, .device = current_device};
  used += static_cast<int64_t>(bytes);
  return p;
}

void Free(void* device_ptr) {
  if (device_ptr == nullptr) return;
  Allocations& a = Tracked();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.sizes.find(device_ptr);
  if (it != a.sizes.end()) {
    a.used[it->second.device] -= static_cast<int64_t>(it->second.bytes);
    a.sizes.erase(it);
  }
  std::free(device_ptr);
}

absl::StatusOr<void*> MallocHost(size_t bytes) {
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("no host memory for ", bytes, " bytes"));
  return p;
}

void FreeHost(void* host_ptr) { std::free(host_ptr); }

absl::Status MemGetInfo(int64_t* free_bytes, int64_t* total_bytes) {
  Allocations& a = Tracked();
  std::lock_guard<std::mutex> lock(a.mu);
  *free_bytes = kDeviceBytes - a.used[current_device];
  *total_bytes = kDeviceBytes;
  return absl::OkStatus();
}

absl::StatusOr<Stream> CreateStream() { return new CUstream_st(); }

void DestroyStream(Stream stream) { delete stream; }

absl::Status CopyToDevice(void* dst, const void* src, size_t bytes, Stream) {
  std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status CopyToHost(void* dst, const void* src, size_t bytes, Stream) {
  std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status CopyOnDevice(void* dst, const void* src, size_t bytes, Stream) {
  std::memmove(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status Memset(void* dst, int value, size_t bytes, Stream) {
  std::memset(dst, value, bytes);
  return absl::OkStatus();
}

absl::Status Synchronize(Stream) { return absl::OkStatus(); }

absl::Status CheckLaunches(const char*) { return absl::OkStatus(); }

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::cuda
