// The AVX-512 VNNI instantiation of the integer-dot kernels, compiled with
// AVX-512 flags (kernels/cpu/CMakeLists.txt) and called only when CPUID says
// the CPU has them (matmul_q8.cc).
#include "kernels/cpu/matmul_q8_kernel.h"

namespace kvfleet::kernels {
namespace {

struct VnniDot {
  // vpdpbusd: lane l += Σ u[4l+i] · s[4l+i], i = 0..3, exactly.
  static __m256i Accumulate(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static constexpr bool kWidensThroughInt16 = false;  // one instruction to int32 already
  static __m256i Widen(__m256i acc, __m256i) { return acc; }
  // 32 vector registers: eight tokens' accumulators, offsets and dots fit.
  static constexpr int kTokens = 8;
};

}  // namespace

void Q8PanelRowsVnni(DType w_type, const uint8_t* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y,
                     int64_t panel_begin, int64_t panel_end) {
  Q8PanelRowsFor<VnniDot>(w_type, w, n, k, xq, m, y, panel_begin, panel_end);
}

}  // namespace kvfleet::kernels

namespace kvfleet::kernels {

// For machine_ceilings.cc: 8 independent vpdpbusd chains, `iterations` rounds.
int64_t VnniDotLoop(int64_t iterations) {
  __m256i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_dpbusd_epi32(acc[i], u, s);
  }
  __m256i t = acc[0];
  for (int i = 1; i < 8; ++i) t = _mm256_add_epi32(t, acc[i]);
  return _mm256_extract_epi32(t, 0);
}

}  // namespace kvfleet::kernels
