// The AVX-512 VNNI instantiation of the integer-dot kernels, compiled with
// AVX-512 flags (kernels/cpu/CMakeLists.txt) and called only when CPUID says
// the CPU has them (matmul_q8.cc).
#include "kernels/cpu/matmul_q8_kernel.h"

// GCC 12 takes the "undefined" pass-through operand inside several 512-bit
// intrinsics (vinserti64x4, vcvtph2ps, vcvtdq2ps) for an uninitialized read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace kvfleet::kernels {
namespace {

// Two panels side by side in one 512-bit register: lanes 0-7 the rows of
// the panel at p, lanes 8-15 those of the panel `stride` bytes on (the same
// panel again where the stride is 0). Each op is Lanes256's, per half.
struct Lanes512 {
  using I = __m512i;
  using F = __m512;
  static constexpr int kPanels = 2;

  static I Load(const uint8_t* p, int64_t stride) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(Lanes256::Load(p, 0)), Lanes256::Load(p + stride, 0), 1);
  }
  static I Broadcast(const int8_t* qs) {
    int32_t v;
    std::memcpy(&v, qs, 4);
    return _mm512_set1_epi32(v);
  }
  static I And(I a, I b) { return _mm512_and_si512(a, b); }
  static I Or(I a, I b) { return _mm512_or_si512(a, b); }
  template <int N>
  static I ShiftRight16(I v) {
    return _mm512_srli_epi16(v, N);
  }
  template <int N>
  static I ShiftLeft16(I v) {
    return _mm512_slli_epi16(v, N);
  }
  template <int N>
  static I ShiftRight32(I v) {
    return _mm512_srli_epi32(v, N);
  }
  static I SplatByte(char c) { return _mm512_set1_epi8(c); }
  static I SplatInt(int32_t v) { return _mm512_set1_epi32(v); }
  static I ZeroInt() { return _mm512_setzero_si512(); }
  static I Add16(I a, I b) { return _mm512_add_epi16(a, b); }
  static I Sub32(I a, I b) { return _mm512_sub_epi32(a, b); }
  // AVX-512 has no vpsignb: x is negated where w < 0 and kept where w is 0,
  // which changes no product, since |w| is 0 there.
  static I Abs8(I w) { return _mm512_abs_epi8(w); }
  static I SignOf(I x, I w) { return _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x); }
  static F Halfs(const uint8_t* p, int64_t stride) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + stride));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
  }
  static __m128i TwoEights(const uint8_t* p, int64_t stride) {
    return _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + stride)));
  }
  static I Bytes32(const uint8_t* p, int64_t stride) { return _mm512_cvtepu8_epi32(TwoEights(p, stride)); }
  static F Bytes(const uint8_t* p, int64_t stride, bool is_signed) {
    const __m128i b = TwoEights(p, stride);
    return _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
  }
  static F ToFloat(I v) { return _mm512_cvtepi32_ps(v); }
  static F SplatFloat(float v) { return _mm512_set1_ps(v); }
  static F ZeroFloat() { return _mm512_setzero_ps(); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F Negate(F v) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)));
  }
  static void Store(float* y, F v, int rows) { _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << rows) - 1), v); }
};

struct VnniDot {
  using V = Lanes512;
  // vpdpbusd: lane l += Σ u[4l+i] · s[4l+i], i = 0..3, exactly.
  static __m512i Accumulate(__m512i acc, __m512i u, __m512i s) { return _mm512_dpbusd_epi32(acc, u, s); }
  static constexpr bool kWidensThroughInt16 = false;  // one instruction to int32 already
  static __m512i Widen(__m512i acc, __m512i) { return acc; }
  // 32 vector registers: eight tokens' accumulators, offsets and dots fit.
  static constexpr int kHeldTokens = 0;  // PanelTokens' order only
  static constexpr int kTokens = 8;
};

}  // namespace

void Q8PanelRowsVnni(DType w_type, const uint8_t* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y,
                     int64_t panel_begin, int64_t panel_end) {
  Q8PanelRowsFor<VnniDot>(w_type, w, n, k, xq, m, y, panel_begin, panel_end);
}

}  // namespace kvfleet::kernels

namespace kvfleet::kernels {

// For machine_ceilings.cc: 8 independent chains of 512-bit vpdpbusd (64
// multiply-adds each, the kernels' width), `iterations` rounds.
int64_t VnniDotLoop(int64_t iterations) {
  __m512i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], u, s);
  }
  __m512i t = acc[0];
  for (int i = 1; i < 8; ++i) t = _mm512_add_epi32(t, acc[i]);
  return _mm512_reduce_add_epi32(t);
}

}  // namespace kvfleet::kernels
