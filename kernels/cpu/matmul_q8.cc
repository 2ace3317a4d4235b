#include "kernels/cpu/matmul_q8.h"

#include <atomic>
#include <cmath>
#include <vector>

#include "common/check.h"
#include "common/float16.h"
#include "kernels/cpu/matmul_q8_kernel.h"
#include "kernels/cpu/quant_blocks.h"

namespace kvfleet::kernels {

// The kernels' panel sizes (matmul_q8_kernel.h) against the panel format's.
static_assert(PanelBlockBytes<DType::kQ8_0>() == kQ8PanelRows * sizeof(BlockQ8_0));
static_assert(PanelBlockBytes<DType::kQ4_0>() == kQ8PanelRows * sizeof(BlockQ4_0));
static_assert(PanelBlockBytes<DType::kQ4_1>() == kQ8PanelRows * sizeof(BlockQ4_1));

// matmul_q8_vnni.cc, compiled for AVX-512 VNNI.
void Q8PanelRowsVnni(DType w_type, const uint8_t* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y,
                     int64_t panel_begin, int64_t panel_end);

namespace {

struct Avx2Dot {
  // vpmaddubsw sums adjacent byte products into int16 (|sum| ≤ 2·128·127:
  // never saturates), vpmaddwd adjacent int16 pairs into int32: lane l holds
  // bytes 4l .. 4l+3, as vpdpbusd does.
  static __m256i Accumulate(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  // 16 vector registers: four tokens at a time.
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

// The signed value of element i of a weight block, and the block's scales.
struct ScalarBlock {
  int32_t w[32];
  float d;
  float m;
};

ScalarBlock ScalarWeights(DType w_type, const uint8_t* row, int64_t b) {
  ScalarBlock s{};
  if (w_type == DType::kQ8_0) {
    const BlockQ8_0& q = reinterpret_cast<const BlockQ8_0*>(row)[b];
    for (int i = 0; i < 32; ++i) s.w[i] = q.qs[i];
    s.d = HalfToFloat(q.d);
    return s;
  }
  const uint8_t* qs;
  if (w_type == DType::kQ4_0) {
    const BlockQ4_0& q = reinterpret_cast<const BlockQ4_0*>(row)[b];
    qs = q.qs;
    s.d = HalfToFloat(q.d);
  } else {
    const BlockQ4_1& q = reinterpret_cast<const BlockQ4_1*>(row)[b];
    qs = q.qs;
    s.d = HalfToFloat(q.d);
    s.m = HalfToFloat(q.m);
  }
  const int offset = w_type == DType::kQ4_0 ? 8 : 0;
  for (int i = 0; i < 16; ++i) {
    s.w[i] = (qs[i] & 0x0F) - offset;
    s.w[i + 16] = (qs[i] >> 4) - offset;
  }
  return s;
}

}  // namespace

bool Q8ActivationsApply(DType w_type) {
  return w_type == DType::kQ8_0 || w_type == DType::kQ4_0 || w_type == DType::kQ4_1;
}

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
  CHECK(Q8ActivationsApply(w.type)) << "MatMulQ8 takes Q8_0, Q4_0 and Q4_1 weights";
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
  const Call call{w, x, m, y, blocks, scratch,
                  ActiveQ8DotIsa() == Q8DotIsa::kAvx512Vnni ? Q8PanelRowsVnni : Q8PanelRowsAvx2};
  const Call* c = &call;
  if (m == 1) {
    QuantizeActivationRow(x, w.k, call.q);
  } else {
    pool.ParallelFor(m, [c](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) QuantizeActivationRow(c->x + i * c->w.k, c->w.k, c->q + i * c->blocks);
    });
  }
  const int64_t panels = (w.n + kQ8PanelRows - 1) / kQ8PanelRows;
  pool.ParallelFor(panels, [c](int64_t begin, int64_t end) {
    c->rows(c->w.type, c->w.data, c->w.n, c->w.k, c->q, c->m, c->y, begin, end);
  });
}

float DotQ8Reference(DType w_type, const void* w_row, const BlockQ8A* x, int64_t k) {
  const auto* row = static_cast<const uint8_t*>(w_row);
  float acc = 0.0f, offset = 0.0f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const ScalarBlock w = ScalarWeights(w_type, row, b);
    int32_t dot = 0;
    for (int i = 0; i < 32; ++i) dot += w.w[i] * x[b].qs[i];
    acc = std::fma(w.d * x[b].d, static_cast<float>(dot), acc);
    if (w_type == DType::kQ4_1) offset = std::fma(w.m, x[b].dsum, offset);
  }
  return w_type == DType::kQ4_1 ? acc + offset : acc;
}

}  // namespace kvfleet::kernels
