#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/quantize.h"
#include "tests/testing/random_data.h"

namespace kvfleet::kernels {
namespace {

using ::kvfleet::testing::RandomFloats;

struct Case {
  int64_t n, k, m;
};

class MatMulTest : public ::testing::TestWithParam<DType> {};

void ExpectReferenceBitsAtEveryBatch(DType t) {
  // m up to 10 takes the fused kernels; past it, the scratch kernels: on
  // AVX2 their 4x3 and single-token tiles (m = 14: four 4x3 tiles and two
  // left over; m = 13: one left over), on AVX-512 8 rows by 6 tokens (m = 17:
  // two such and 5 left over; n = 37: rows past the last 8 on AVX2's tiles).
  for (Case c : {Case{7, 64, 1}, Case{33, 96, 5}, Case{64, 576, 9}, Case{37, 96, 13}, Case{40, 64, 14},
                 Case{37, 96, 17}, Case{16, 64, 64}}) {
    c.k = RoundUpToBlock(t, c.k);  // a K-quant's rows are whole super-blocks of 256
    const std::vector<float> wf = RandomFloats(c.n * c.k, 1, 1.0f);
    std::vector<uint8_t> w(RowBytes(t, c.n * c.k));
    for (int64_t r = 0; r < c.n; ++r) {
      QuantizeRow(t, wf.data() + r * c.k, w.data() + r * RowBytes(t, c.k), c.k);
    }
    const std::vector<float> x = RandomFloats(c.m * c.k, 2, 1.0f);
    std::vector<float> y(c.m * c.n);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      MatMul({.w_type = t, .w = w.data(), .n = c.n, .k = c.k, .x = x.data(), .m = c.m, .y = y.data()}, pool);
      std::vector<float> wrow(c.k);
      for (int64_t j = 0; j < c.n; ++j) {
        DequantizeRow(t, w.data() + j * RowBytes(t, c.k), wrow.data(), c.k);
        double exact_sum_bound = 0;
        for (int64_t i = 0; i < c.m; ++i) {
          const float ref = DotReference(wrow.data(), x.data() + i * c.k, c.k);
          ASSERT_EQ(y[i * c.n + j], ref) << DTypeName(t) << " row " << i << " col " << j << " threads " << threads;
          double exact = 0;
          for (int64_t kk = 0; kk < c.k; ++kk) exact += static_cast<double>(wrow[kk]) * x[i * c.k + kk];
          exact_sum_bound = std::max(exact_sum_bound, std::abs(exact - ref));
        }
        EXPECT_LT(exact_sum_bound, 1e-3);
      }
      // Each row alone gives the same bits as in the batch.
      for (int64_t i = 0; i < c.m; ++i) {
        std::vector<float> alone(c.n);
        MatMul({.w_type = t, .w = w.data(), .n = c.n, .k = c.k, .x = x.data() + i * c.k, .m = 1, .y = alone.data()},
               pool);
        for (int64_t j = 0; j < c.n; ++j) ASSERT_EQ(alone[j], y[i * c.n + j]);
      }
    }
  }
}

// On every instruction set this CPU has, forced in turn.
TEST_P(MatMulTest, EqualsReferenceBitForBitAndIsBatchInvariant) {
  const DType t = GetParam();
  const FloatDotIsa original = ActiveFloatDotIsa();
  int isas = 0;
  for (FloatDotIsa isa : {FloatDotIsa::kAvx2, FloatDotIsa::kAvx512}) {
    if (!ForceFloatDotIsa(isa)) {
      std::printf("[ SKIPPED  ] %s: this CPU cannot run it\n", std::string(FloatDotIsaName(isa)).c_str());
      continue;
    }
    ++isas;
    SCOPED_TRACE(std::string(FloatDotIsaName(isa)));
    ExpectReferenceBitsAtEveryBatch(t);
  }
  ForceFloatDotIsa(original);
  EXPECT_GE(isas, 1);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulTest, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace kvfleet::kernels
