// The 8-bit activation path: activation quantization against its scalar
// definition, the panel layout's size, the unpacked blocks against the
// float path's values, the integer-dot matmul on packed
// panels against DotQ8Reference (on the row layout) bit for bit on every
// instruction set this machine has (forced in turn), batch and thread
// invariance, and its error against the float32 path.
#include "kernels/cpu/matmul_q8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include "common/float16.h"
#include "kernels/cpu/machine_ceilings.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize.h"
#include "tests/testing/random_data.h"

namespace kvfleet::kernels {
namespace {

using ::kvfleet::testing::RandomFloats;

bool SameBlocks(const std::vector<BlockQ8A>& a, const std::vector<BlockQ8A>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(BlockQ8A)) == 0;
}

TEST(QuantizeActivationsTest, TheAvx2PathIsTheScalarDefinitionBitForBit) {
  std::vector<float> x = RandomFloats(32 * 64, 5, 3.0f);
  x[200] = std::numeric_limits<float>::infinity();                  // an infinity: poisoned like a NaN, not -128
  for (int i = 0; i < 32; ++i) x[i] = 0.0f;                         // an all-zero block: d = 0, q = 0
  for (int i = 32; i < 64; ++i) x[i] = static_cast<float>(i - 48);  // exact ties at .5 after scaling
  x[64] = 1e-30f;                                                   // a tiny block
  for (int i = 65; i < 96; ++i) x[i] = 0.0f;
  x[96] = -65504.0f;  // a large negative maximum: q = -127
  x[128] = 1e-38f;    // a maximum too small to invert: a block of zeros
  for (int i = 129; i < 160; ++i) x[i] = i % 2 ? -1e-39f : 0.0f;
  x[170] = std::numeric_limits<float>::quiet_NaN();  // a NaN: the block's scale is NaN
  std::vector<BlockQ8A> fast(64), reference(64);
  QuantizeActivationRow(x.data(), static_cast<int64_t>(x.size()), fast.data());
  QuantizeActivationRowReference(x.data(), static_cast<int64_t>(x.size()), reference.data());
  EXPECT_TRUE(SameBlocks(fast, reference));
  EXPECT_EQ(fast[0].d, 0.0f);
  EXPECT_EQ(fast[0].sum, 0);
  EXPECT_EQ(fast[3].qs[0], -127);
  EXPECT_EQ(fast[4].sum, 0);
  EXPECT_TRUE(std::all_of(std::begin(fast[4].qs), std::end(fast[4].qs), [](int8_t q) { return q == 0; }));
  EXPECT_TRUE(std::isnan(fast[5].d));
  EXPECT_TRUE(std::isnan(fast[6].d));
  EXPECT_EQ(fast[6].sum, 0);
  for (const BlockQ8A& b : fast) {
    int sum = 0, first_half = 0;
    for (int i = 0; i < 32; ++i) {
      EXPECT_GE(b.qs[i], -127);
      sum += b.qs[i];
      if (i < 16) first_half += b.qs[i];
    }
    EXPECT_EQ(sum, b.sum);
    EXPECT_EQ(first_half, b.sum16[0]);
    EXPECT_EQ(sum - first_half, b.sum16[1]);
  }
}

struct Case {
  int64_t n, k, m;
};

class MatMulQ8Test : public ::testing::TestWithParam<DType> {
 protected:
  std::vector<uint8_t> Weights(int64_t n, int64_t k, uint64_t seed) const {
    const DType t = GetParam();
    const std::vector<float> wf = RandomFloats(n * k, seed, 1.0f);
    std::vector<uint8_t> w(RowBytes(t, n * k));
    for (int64_t r = 0; r < n; ++r) QuantizeRow(t, wf.data() + r * k, w.data() + r * RowBytes(t, k), k);
    return w;
  }
  std::vector<uint8_t> Panels(const std::vector<uint8_t>& rows, int64_t n, int64_t k) const {
    std::vector<uint8_t> panels(Q8PanelBytes(GetParam(), n, k));
    PackQ8Panels(GetParam(), rows.data(), n, k, panels.data());
    return panels;
  }
};

// A packed legacy matrix takes the bytes of its row layout when the rows
// are a multiple of 8 (one padded panel otherwise); a K-quant's adds its
// unpacked sub-block scales: at most 3.7% more, which the executor's memory
// count includes (Q8PanelBytes).
TEST_P(MatMulQ8Test, PanelsTakeTheBytesOfTheRowLayoutOrAFewPercentMore) {
  const DType t = GetParam();
  const int64_t k = IsKQuant(t) ? 768 : 576;
  for (int64_t n : {8, 64, 576, 49152}) {
    const double ratio = static_cast<double>(Q8PanelBytes(t, n, k)) / static_cast<double>(RowBytes(t, n * k));
    if (IsKQuant(t)) {
      EXPECT_GE(ratio, 1.0) << n;
      EXPECT_LE(ratio, 1.037) << n;
    } else {
      EXPECT_EQ(ratio, 1.0) << n;
    }
  }
  EXPECT_EQ(Q8PanelBytes(t, 20, k), Q8PanelBytes(t, 24, k));
}

// What the panels hold of a block (values, scales and mins with their
// bits) is the block: its float values, computed from the unpacked fields
// as the float path's dequantization computes them, are DequantizeRow's
// bit for bit.
TEST_P(MatMulQ8Test, UnpackedBlocksAreTheFormatsValuesBitForBit) {
  const DType t = GetParam();
  const int64_t k = 512;
  const std::vector<uint8_t> w = Weights(4, k, 31);
  std::vector<float> want(k);
  const Q8PanelLayout l = PanelLayout(t);
  for (int64_t r = 0; r < 4; ++r) {
    const uint8_t* row = w.data() + r * RowBytes(t, k);
    DequantizeRow(t, row, want.data(), k);
    for (int64_t b = 0; b < k / 32; ++b) {
      const Q8SourceBlock s = UnpackQ8SourceBlock(t, row, b);
      const float d = HalfToFloat(s.d), dmin = HalfToFloat(s.dmin);
      for (int e = 0; e < 32; ++e) {
        const int h = e / 16;
        float v;
        if (l.signed_values) {
          v = static_cast<float>(static_cast<int8_t>(s.u[e])) * d;
        } else if (!l.super) {
          v = l.has_min ? std::fma(static_cast<float>(s.u[e]), d, dmin) : static_cast<float>(s.u[e] - l.zero) * d;
        } else if (l.zero != 0) {
          v = d * static_cast<float>(static_cast<int8_t>(s.scale[h])) * static_cast<float>(s.u[e] - l.zero);
        } else {
          v = d * static_cast<float>(s.scale[h]) * static_cast<float>(s.u[e]) - dmin * static_cast<float>(s.min[h]);
        }
        ASSERT_EQ(v, want[32 * b + e]) << DTypeName(t) << " row " << r << " block " << b << " element " << e;
      }
    }
  }
}

TEST_P(MatMulQ8Test, EveryInstructionSetEqualsTheReferenceBitForBitAtAnyBatchAndThreads) {
  const DType t = GetParam();
  const Q8DotIsa original = ActiveQ8DotIsa();
  int isas = 0;
  for (Q8DotIsa isa : {Q8DotIsa::kAvx2, Q8DotIsa::kAvx512Vnni}) {
    if (!ForceQ8DotIsa(isa)) {
      std::printf("[ SKIPPED  ] %s: this CPU cannot run it\n", std::string(Q8DotIsaName(isa)).c_str());
      continue;
    }
    ++isas;
    const bool k_quant = IsKQuant(t);
    for (Case c : {Case{7, k_quant ? 256 : 64, 1}, Case{37, 256, 1}, Case{33, k_quant ? 512 : 96, 5}, Case{41, 768, 13},
                   Case{16, 256, 9}, Case{17, 256, 10}, Case{8, 256, 12}, Case{16, 256, 14}, Case{11, 256, 15},
                   Case{24, k_quant ? 256 : 128, 64},
                   Case{9, k_quant ? 256 : 64, 131}}) {  // past a pass of the AVX2 kernels' 128 tokens
      const std::vector<uint8_t> w = Weights(c.n, c.k, 11);
      const std::vector<uint8_t> panels = Panels(w, c.n, c.k);
      const Q8PanelWeights pw{t, c.n, c.k, panels.data()};
      const std::vector<float> x = RandomFloats(c.m * c.k, 12, 2.0f);
      std::vector<BlockQ8A> xq(c.m * c.k / 32);
      for (int64_t i = 0; i < c.m; ++i)
        QuantizeActivationRowReference(x.data() + i * c.k, c.k, xq.data() + i * c.k / 32);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(c.m * c.n);
        MatMulQ8(pw, x.data(), c.m, y.data(), pool);
        for (int64_t i = 0; i < c.m; ++i) {
          // The same token alone: the same bits (batch invariance).
          std::vector<float> alone(c.n);
          MatMulQ8(pw, x.data() + i * c.k, 1, alone.data(), pool);
          for (int64_t j = 0; j < c.n; ++j) {
            const float ref = DotQ8Reference(t, w.data() + j * RowBytes(t, c.k), xq.data() + i * c.k / 32, c.k);
            ASSERT_EQ(y[i * c.n + j], ref) << DTypeName(t) << " " << Q8DotIsaName(isa) << " token " << i << " row " << j
                                           << " of " << c.n << "x" << c.k << ", m " << c.m;
            ASSERT_EQ(alone[j], ref) << "alone, token " << i << " row " << j;
          }
        }
      }
    }
  }
  ForceQ8DotIsa(original);
  EXPECT_GE(isas, 1);
}

// The largest sums the kernels' narrow integers meet: constant rows (the
// formats with a min quantize them to their largest value everywhere)
// against activations all at +127 or all at -127, on every instruction
// set, still equal the scalar definition (the AVX2 path adds several
// registers' byte-pair sums in int16 before widening them).
TEST_P(MatMulQ8Test, ExtremeValuesOnEveryInstructionSetEqualTheReference) {
  const DType t = GetParam();
  const int64_t n = 16, k = 512;
  std::vector<float> wf(n * k);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < k; ++i) wf[r * k + i] = r % 2 == 0 ? 1.0f + static_cast<float>(r) : -0.5f;
  }
  std::vector<uint8_t> w(RowBytes(t, n * k));
  for (int64_t r = 0; r < n; ++r) QuantizeRow(t, wf.data() + r * k, w.data() + r * RowBytes(t, k), k);
  const std::vector<uint8_t> panels = Panels(w, n, k);
  const Q8PanelWeights pw{t, n, k, panels.data()};
  const Q8DotIsa original = ActiveQ8DotIsa();
  ThreadPool pool(2);
  for (Q8DotIsa isa : {Q8DotIsa::kAvx2, Q8DotIsa::kAvx512Vnni}) {
    if (!ForceQ8DotIsa(isa)) continue;
    for (float sign : {1.0f, -1.0f}) {
      const int64_t m = 5;
      const std::vector<float> x(m * k, 3.0f * sign);
      std::vector<BlockQ8A> xq(m * k / 32);
      for (int64_t i = 0; i < m; ++i) QuantizeActivationRowReference(x.data() + i * k, k, xq.data() + i * k / 32);
      std::vector<float> y(m * n);
      MatMulQ8(pw, x.data(), m, y.data(), pool);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          ASSERT_EQ(y[i * n + j], DotQ8Reference(t, w.data() + j * RowBytes(t, k), xq.data() + i * k / 32, k))
              << DTypeName(t) << " " << Q8DotIsaName(isa) << " sign " << sign << " row " << j;
        }
      }
    }
  }
  ForceQ8DotIsa(original);
}

// The quantization error of 8-bit activations: each block's values move by
// at most half a step (d / 2), so |y − y_f32| ≤ Σ_b (d_b / 2) · Σ|w_b| plus
// float rounding; checked against that bound, and typically far inside it.
TEST_P(MatMulQ8Test, StaysWithinTheActivationQuantizationBoundOfTheFloatPath) {
  const DType t = GetParam();
  const int64_t n = 64, k = 768, m = 3;
  const std::vector<uint8_t> w = Weights(n, k, 21);
  const std::vector<float> x = RandomFloats(m * k, 22, 1.0f);
  ThreadPool pool(2);
  std::vector<float> y8(m * n), y32(m * n);
  const std::vector<uint8_t> panels = Panels(w, n, k);
  MatMulQ8({t, n, k, panels.data()}, x.data(), m, y8.data(), pool);
  MatMul({.w_type = t, .w = w.data(), .n = n, .k = k, .x = x.data(), .m = m, .y = y32.data()}, pool);
  std::vector<float> wrow(k);
  double worst_share = 0, diff2 = 0, norm2 = 0;
  for (int64_t e = 0; e < m * n; ++e) {
    diff2 += (static_cast<double>(y8[e]) - y32[e]) * (static_cast<double>(y8[e]) - y32[e]);
    norm2 += static_cast<double>(y32[e]) * y32[e];
  }
  for (int64_t j = 0; j < n; ++j) {
    DequantizeRow(t, w.data() + j * RowBytes(t, k), wrow.data(), k);
    for (int64_t i = 0; i < m; ++i) {
      double bound = 0, scale = 0;
      for (int64_t b = 0; b < k / 32; ++b) {
        double amax = 0, wabs = 0;
        for (int e = 0; e < 32; ++e) {
          amax = std::max(amax, std::fabs(static_cast<double>(x[i * k + 32 * b + e])));
          wabs += std::fabs(static_cast<double>(wrow[32 * b + e]));
          scale += std::fabs(static_cast<double>(wrow[32 * b + e]) * x[i * k + 32 * b + e]);
        }
        bound += (amax / 127.0 / 2.0) * wabs;
      }
      const double error = std::fabs(static_cast<double>(y8[i * n + j]) - y32[i * n + j]);
      EXPECT_LE(error, bound + 1e-5 * scale) << DTypeName(t) << " token " << i << " row " << j;
      worst_share = std::max(worst_share, error / bound);
    }
  }
  const double relative = std::sqrt(diff2 / norm2);
  std::printf("%s: worst error %.3f of the quantization bound; relative error %.4f\n",
              std::string(DTypeName(t)).c_str(), worst_share, relative);
  // Half a step in 127 over blocks of 32: about 0.3% of the signal for unit-scale data.
  EXPECT_LT(relative, 0.02);
}

// Every type of the table with panels.
std::vector<DType> PanelTypes() {
  std::vector<DType> types;
  for (DType t : kAllDTypes) {
    if (PanelLayout(t).low_bits != 0) types.push_back(t);
  }
  return types;
}

// The 8-bit path takes every quantized type; plain floats stay on the float path.
TEST(MatMulQ8FormatsTest, EveryQuantizedTypeHasPanels) {
  for (DType t : kAllDTypes) EXPECT_EQ(Q8ActivationsApply(t), !IsFloat(t)) << DTypeName(t);
}

INSTANTIATE_TEST_SUITE_P(Formats, MatMulQ8Test, ::testing::ValuesIn(PanelTypes()),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace kvfleet::kernels

namespace kvfleet::kernels {
namespace {

// The ceilings are measurements (not checked against any speed); what is
// checked is that each is measured: positive, finite, and named.
TEST(MachineCeilingsTest, MeasuresEveryCeilingOnThePoolsThreads) {
  ThreadPool pool(2);
  const MachineCeilings c = MeasureMachineCeilings(pool, size_t{8} << 20);
  for (double v : {c.read_bytes_per_s, c.fma_flops_per_s, c.int8_macs_per_s}) {
    EXPECT_GT(v, 0);
    EXPECT_TRUE(std::isfinite(v));
  }
  EXPECT_EQ(c.int8_isa, Q8DotIsaName(ActiveQ8DotIsa()));
}

}  // namespace
}  // namespace kvfleet::kernels
