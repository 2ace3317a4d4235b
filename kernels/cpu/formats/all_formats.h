// Every weight format's CPU file, one per row of KVFLEET_WEIGHT_TYPES
// (common/dtype.h); the static_assert below fails the build when a row has
// no file here.
#pragma once

#include "kernels/cpu/formats/bf16.h"
#include "kernels/cpu/formats/f16.h"
#include "kernels/cpu/formats/f32.h"
#include "kernels/cpu/formats/q2_k.h"
#include "kernels/cpu/formats/q3_k.h"
#include "kernels/cpu/formats/q4_0.h"
#include "kernels/cpu/formats/q4_1.h"
#include "kernels/cpu/formats/q4_k.h"
#include "kernels/cpu/formats/q5_0.h"
#include "kernels/cpu/formats/q5_1.h"
#include "kernels/cpu/formats/q5_k.h"
#include "kernels/cpu/formats/q6_k.h"
#include "kernels/cpu/formats/q8_0.h"

namespace kvfleet::kernels {

template <DType T>
concept HasCpuFormat = requires {
  typename CpuFormat<T>::Reader;
};

static_assert(
    [] {
      for (DType t : kAllDTypes) {
        if (!DispatchDType(t, [](auto c) { return HasCpuFormat<decltype(c)::value>; })) return false;
      }
      return true;
    }(),
    "a weight type of KVFLEET_WEIGHT_TYPES has no kernels/cpu/formats/ file");

// Its 8-bit activation panels (q8_panels.h); low_bits 0 for none.
template <DType T>
inline constexpr Q8PanelLayout kQ8Panels = CpuFormat<T>::kPanels;

template <DType T>
inline constexpr bool kHasQ8Panels = CpuFormat<T>::kPanels.low_bits != 0;

}  // namespace kvfleet::kernels
