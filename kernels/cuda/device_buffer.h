// Owning handles for device memory (cudaMalloc, never managed memory) and
// page-locked host memory, freed when they go.
//
//   ASSIGN_OR_RETURN(DeviceBuffer weights, DeviceBuffer::Allocate(bytes));
//   float* x = weights.as<float>();
#pragma once

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "kernels/cuda/device_runtime.h"

namespace kvfleet::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <bool kPinnedHost>
class Buffer {
 public:
  static absl::StatusOr<Buffer> Allocate(size_t bytes) {
    absl::StatusOr<void*> p = kPinnedHost ? MallocHost(bytes) : Malloc(bytes);
    if (!p.ok()) return p.status();
    return Buffer(*p, bytes);
  }

  Buffer() = default;
  Buffer(Buffer&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if constexpr (kPinnedHost) {
      FreeHost(ptr_);
    } else {
      Free(ptr_);
    }
  }

  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  Buffer(void* ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {}

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = Buffer<false>;
using PinnedHostBuffer = Buffer<true>;

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::cuda
