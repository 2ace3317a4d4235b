#include "kernels/cpu/paged_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/float16.h"
#include "tests/testing/random_data.h"

namespace kvfleet::kernels {
namespace {

using ::kvfleet::testing::RandomFloats;

constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 16, kBlock = 4, kBlocks = 32;

struct Cache {
  KvCacheLayout layout{kBlocks, kKvHeads, kBlock, kDim};
  std::vector<uint16_t> k = std::vector<uint16_t>(kBlocks * kKvHeads * kBlock * kDim);
  std::vector<uint16_t> v = std::vector<uint16_t>(kBlocks * kKvHeads * kBlock * kDim);
};

// Fills positions 0..len-1 of one sequence with the given K/V rows and
// returns the output of attention for the last `queries` positions.
std::vector<float> Attend(Cache& cache, const std::vector<int32_t>& table, const std::vector<float>& k,
                          const std::vector<float>& v, const std::vector<float>& q, int64_t len, int64_t queries) {
  std::vector<int32_t> positions(len), chunk(len, 0);
  std::vector<int64_t> slots(len);
  for (int64_t i = 0; i < len; ++i) {
    positions[i] = static_cast<int32_t>(i);
    slots[i] = table[i / kBlock] * kBlock + i % kBlock;
  }
  const int64_t width = static_cast<int64_t>(table.size());
  const TokenPlacement all{positions.data(), chunk.data(), table.data(), width, slots.data()};
  WriteKv(cache.layout, all, k.data(), v.data(), len, cache.k.data(), cache.v.data());
  const int64_t first = len - queries;
  const TokenPlacement last{positions.data() + first, chunk.data(), table.data(), width, slots.data() + first};
  std::vector<float> out(queries * kHeads * kDim);
  ThreadPool pool(2);
  PagedAttention({.layout = cache.layout,
                  .where = last,
                  .num_tokens = queries,
                  .num_heads = kHeads,
                  .scale = 0.25f,
                  .q = q.data() + (len - queries) * kHeads * kDim,
                  .k_cache = cache.k.data(),
                  .v_cache = cache.v.data(),
                  .out = out.data()},
                 pool);
  return out;
}

TEST(PagedAttentionTest, MatchesNaiveCausalAttentionInDouble) {
  const int64_t len = 13;
  const auto k = RandomFloats(len * kKvHeads * kDim, 1, 2.0f), v = RandomFloats(len * kKvHeads * kDim, 2, 2.0f);
  const auto q = RandomFloats(len * kHeads * kDim, 3, 2.0f);
  Cache cache;
  const std::vector<int32_t> table = {5, 0, 9, 2};
  const auto out = Attend(cache, table, k, v, q, len, len);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t g = h / (kHeads / kKvHeads);
      std::vector<double> s(t + 1);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= t; ++j) {
        double d = 0;
        for (int64_t i = 0; i < kDim; ++i) {
          d += q[(t * kHeads + h) * kDim + i] * HalfToFloat(FloatToHalf(k[(j * kKvHeads + g) * kDim + i]));
        }
        s[j] = d * 0.25;
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t i = 0; i < kDim; ++i) {
        double o = 0;
        for (int64_t j = 0; j <= t; ++j) o += s[j] / sum * HalfToFloat(FloatToHalf(v[(j * kKvHeads + g) * kDim + i]));
        EXPECT_NEAR(out[(t * kHeads + h) * kDim + i], o, 1e-5) << "token " << t << " head " << h << " dim " << i;
      }
    }
  }
}

TEST(PagedAttentionTest, IndependentOfBlockPlacementAndOfBatching) {
  const int64_t len = 11;
  const auto k = RandomFloats(len * kKvHeads * kDim, 4, 2.0f), v = RandomFloats(len * kKvHeads * kDim, 5, 2.0f);
  const auto q = RandomFloats(len * kHeads * kDim, 6, 2.0f);
  Cache a, b;
  const auto all = Attend(a, {0, 1, 2}, k, v, q, len, len);
  const auto last_only = Attend(b, {30, 7, 19}, k, v, q, len, 1);
  for (int64_t i = 0; i < kHeads * kDim; ++i) {
    ASSERT_EQ(last_only[i], all[(len - 1) * kHeads * kDim + i]) << "element " << i;
  }
}

}  // namespace
}  // namespace kvfleet::kernels
