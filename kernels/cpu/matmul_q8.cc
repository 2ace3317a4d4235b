#include "kernels/cpu/matmul_q8.h"

#include <atomic>
#include <cmath>
#include <vector>

#include "common/check.h"
#include "common/float16.h"
#include "kernels/cpu/matmul_q8_kernel.h"

namespace kvfleet::kernels {

// matmul_q8_vnni.cc, compiled for AVX-512 VNNI.
void Q8PanelRowsVnni(DType w_type, const uint8_t* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y,
                     int64_t panel_begin, int64_t panel_end);

namespace {

// Fewer tokens than this take the AVX2 kernels for a K-quant on a VNNI
// machine (MatMulQ8).
constexpr int64_t kVnniMinTokens = 8;

struct Avx2Dot {
  using V = Lanes256;
  // vpmaddubsw sums adjacent byte products into int16 (|sum| ≤ 2·128·127:
  // never saturates), vpmaddwd adjacent int16 pairs into int32: lane l holds
  // bytes 4l .. 4l+3, as vpdpbusd does.
  static __m256i Pairs(__m256i u, __m256i s) { return _mm256_maddubs_epi16(u, s); }
  static __m256i Accumulate(__m256i acc, __m256i u, __m256i s) { return Widen(acc, Pairs(u, s)); }
  // acc += int16 pair sums, adjacent pairs added into each int32 lane.
  static constexpr bool kWidensThroughInt16 = true;
  static __m256i Widen(__m256i acc, __m256i pairs) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  // 16 vector registers. A block's 8 u-registers are held while up to
  // kHeldTokens tokens pass over them, one at a time (PanelTokensHeld); a
  // pass over 128 tokens measured 1.3-1.5x the Q4_K and Q6_K rate of 4 at
  // a time in PanelTokens' order, which spills. Q8_0's signed values need
  // their signs as well and keep that order, four tokens at a time.
  static constexpr int kHeldTokens = 128;
  static constexpr int kTokens = 4;
};

void Q8PanelRowsAvx2(DType w_type, const uint8_t* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y,
                     int64_t panel_begin, int64_t panel_end) {
  Q8PanelRowsFor<Avx2Dot>(w_type, w, n, k, xq, m, y, panel_begin, panel_end);
}

bool DetectVnni() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

std::atomic<Q8DotIsa>& Active() {
  static std::atomic<Q8DotIsa> isa{DetectVnni() ? Q8DotIsa::kAvx512Vnni : Q8DotIsa::kAvx2};
  return isa;
}

std::vector<BlockQ8A>& Scratch() {
  thread_local std::vector<BlockQ8A> scratch;
  return scratch;
}

// A weight block's values and float scales, from its row layout: the
// format's definition, for DotQ8Reference.
struct ScalarBlock {
  int32_t w[32];  // unsigned values (Q8_0: signed)
  int zero = 0;
  int halves = 1;
  float scale[2];  // per half (both the same with one per 32 values)
  float min[2];    // the signed offset per half: m, or −(dmin · min)
  bool has_min = false;
};

ScalarBlock ScalarWeights(DType w_type, const uint8_t* row, int64_t b) {
  const Q8PanelLayout l = PanelLayout(w_type);
  const Q8SourceBlock src = UnpackQ8SourceBlock(w_type, row, b);
  ScalarBlock s;
  for (int i = 0; i < 32; ++i) s.w[i] = l.signed_values ? static_cast<int8_t>(src.u[i]) : src.u[i];
  s.zero = l.zero;
  s.halves = l.halves;
  s.has_min = l.has_min;
  const float d = HalfToFloat(src.d), dmin = HalfToFloat(src.dmin);
  for (int h = 0; h < 2; ++h) {
    if (!l.super) {
      s.scale[h] = d;
      s.min[h] = dmin;  // Q4_1, Q5_1: m
    } else if (l.scales == Q8Scales::kSigned8) {
      s.scale[h] = d * static_cast<float>(static_cast<int8_t>(src.scale[h]));
    } else {
      s.scale[h] = d * static_cast<float>(src.scale[h]);
      s.min[h] = -(dmin * static_cast<float>(src.min[h]));
    }
  }
  return s;
}

}  // namespace

bool Q8ActivationsApply(DType w_type) { return PanelLayout(w_type).low_bits != 0; }

bool CpuHasQ8DotIsa(Q8DotIsa isa) { return isa == Q8DotIsa::kAvx2 || DetectVnni(); }

Q8DotIsa ActiveQ8DotIsa() { return Active().load(); }

bool ForceQ8DotIsa(Q8DotIsa isa) {
  if (!CpuHasQ8DotIsa(isa)) return false;
  Active().store(isa);
  return true;
}

std::string_view Q8DotIsaName(Q8DotIsa isa) { return isa == Q8DotIsa::kAvx2 ? "avx2" : "avx512-vnni"; }

void MatMulQ8(const Q8PanelWeights& w, const float* x, int64_t m, float* y, ThreadPool& pool, BlockQ8A* scratch) {
  CHECK(w.k % 32 == 0) << "matmul inner dimension " << w.k << " must be a multiple of 32";
  CHECK(Q8ActivationsApply(w.type)) << "MatMulQ8 takes no " << DTypeName(w.type) << " weights";
  // Everything the workers need behind one pointer: a lambda capturing more
  // than that would make each ParallelFor allocate its std::function.
  struct Call {
    const Q8PanelWeights& w;
    const float* x;
    int64_t m;
    float* y;
    int64_t blocks;
    BlockQ8A* q;
    decltype(&Q8PanelRowsAvx2) rows;
  };
  const int64_t blocks = w.k / 32;
  if (scratch == nullptr) {
    std::vector<BlockQ8A>& own = Scratch();
    own.resize(static_cast<size_t>(m * blocks));
    scratch = own.data();
  }
  // Below 8 tokens a K-quant takes the AVX2 kernels even where VNNI is
  // chosen: their order (a panel's values formed once per block, one panel
  // read at a time) reads the weights near the bandwidth ceiling, where the
  // 512-bit kernels' two panels at once read at half of it (Q4_K, 8960 ×
  // 1536, one token on a Zen 5 VM: 157 µs against 305; 291 against 418 at
  // four tokens; from eight, VNNI's 452 against 575). The 32-value formats
  // measured equal (Q4_1) or lose the held order (Q8_0's signed values), so
  // they stay on VNNI. Both give the same bits.
  const bool vnni = ActiveQ8DotIsa() == Q8DotIsa::kAvx512Vnni && (m >= kVnniMinTokens || !PanelLayout(w.type).super);
  const Call call{w, x, m, y, blocks, scratch, vnni ? Q8PanelRowsVnni : Q8PanelRowsAvx2};
  const Call* c = &call;
  if (m == 1) {
    QuantizeActivationRow(x, w.k, call.q);
  } else {
    pool.ParallelFor(m, [c](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) QuantizeActivationRow(c->x + i * c->w.k, c->w.k, c->q + i * c->blocks);
    });
  }
  const int64_t panels = (w.n + kQ8PanelRows - 1) / kQ8PanelRows;
  // Ranges of whole panel pairs: the AVX-512 kernels take two at a time.
  pool.ParallelFor(
      panels,
      [c](int64_t begin, int64_t end) { c->rows(c->w.type, c->w.data, c->w.n, c->w.k, c->q, c->m, c->y, begin, end); },
      /*grain=*/2);
}

float DotQ8Reference(DType w_type, const void* w_row, const BlockQ8A* x, int64_t k) {
  const auto* row = static_cast<const uint8_t*>(w_row);
  float acc = 0.0f, offset = 0.0f;
  bool has_min = false;
  for (int64_t b = 0; b < k / 32; ++b) {
    const ScalarBlock w = ScalarWeights(w_type, row, b);
    has_min = w.has_min;
    const int width = 32 / w.halves;
    for (int h = 0; h < w.halves; ++h) {
      int32_t dot = 0;
      for (int i = h * width; i < (h + 1) * width; ++i) dot += w.w[i] * x[b].qs[i];
      dot -= w.zero * (w.halves == 2 ? x[b].sum16[h] : x[b].sum);
      acc = std::fma(w.scale[h] * x[b].d, static_cast<float>(dot), acc);
      if (w.has_min) {
        const float dsum = w.halves == 2 ? x[b].d * static_cast<float>(x[b].sum16[h]) : x[b].dsum;
        offset = std::fma(w.min[h], dsum, offset);
      }
    }
  }
  return has_min ? acc + offset : acc;
}

}  // namespace kvfleet::kernels
