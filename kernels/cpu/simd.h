// Small AVX2 helpers shared by the CPU kernels. HorizontalSum fixes the
// order in which the eight lanes are added, which the exactness guarantee of
// every kernel relies on.
//
// Each has internal linkage (`static`): a file compiled with AVX-512 flags
// (matmul_f32_avx512.cc) includes them too, and an ordinary inline
// function's copy from that file could be the one the linker keeps for the
// AVX2 files, and fault on a CPU without AVX-512.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

namespace kvfleet::kernels {

// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), always in this order.
static inline float HorizontalSum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Σ a[i]·b[i] for n a multiple of 8, one accumulator, fixed order.
static inline float Dot8(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  return HorizontalSum(acc);
}

// Calls f(std::integral_constant<int, n>{}) for a run-time n in [1, N]: a
// kernel's row or token count as a template argument, so its loops unroll.
template <int N, class F>
static inline __attribute__((always_inline)) void WithCount(int64_t n, F&& f) {
  if constexpr (N > 1) {
    if (n < N) return WithCount<N - 1>(n, f);
  }
  f(std::integral_constant<int, N>{});
}

}  // namespace kvfleet::kernels
