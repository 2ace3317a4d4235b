// The AVX-512 VNNI instantiation of the integer-dot kernels, compiled with
// AVX-512 flags (kernels/cpu/CMakeLists.txt) and called only when CPUID says
// the CPU has them (matmul_q8.cc).
#include "kernels/cpu/matmul_q8_kernel.h"

namespace kvfleet::kernels {
namespace {

struct VnniDot {
  // vpdpbusd: lane l += Σ u[4l+i] · s[4l+i], i = 0..3, exactly.
  static __m256i Lanes(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};

}  // namespace

void Q8MatMulRowsVnni(DType w_type, const void* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y,
                      int64_t row_begin, int64_t row_end) {
  Q8MatMulRowsFor<VnniDot>(w_type, w, n, k, xq, m, y, row_begin, row_end);
}

}  // namespace kvfleet::kernels
