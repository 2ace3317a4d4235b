// Every weight format's CUDA file, one per row of KVFLEET_WEIGHT_TYPES
// (common/dtype.h); the static_assert below fails the build when a row has
// no file here.
#pragma once

#include <type_traits>

#include "kernels/cuda/formats/bf16.cuh"
#include "kernels/cuda/formats/f16.cuh"
#include "kernels/cuda/formats/f32.cuh"
#include "kernels/cuda/formats/q2_k.cuh"
#include "kernels/cuda/formats/q3_k.cuh"
#include "kernels/cuda/formats/q4_0.cuh"
#include "kernels/cuda/formats/q4_1.cuh"
#include "kernels/cuda/formats/q4_k.cuh"
#include "kernels/cuda/formats/q5_0.cuh"
#include "kernels/cuda/formats/q5_1.cuh"
#include "kernels/cuda/formats/q5_k.cuh"
#include "kernels/cuda/formats/q6_k.cuh"
#include "kernels/cuda/formats/q8_0.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <DType T, class = void>
struct HasDeviceFormat : std::false_type {};
template <DType T>
struct HasDeviceFormat<T, std::void_t<decltype(DeviceFormat<T>::kElements)>> : std::true_type {};

static_assert(
    [] {
      for (DType t : kAllDTypes) {
        if (!DispatchDType(t, [](auto c) { return HasDeviceFormat<decltype(c)::value>::value; })) return false;
      }
      return true;
    }(),
    "a weight type of KVFLEET_WEIGHT_TYPES has no kernels/cuda/formats/ file");

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
