#include "kernels/cpu/paged_attention.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/float16.h"
#include "kernels/cpu/simd.h"
#include "tests/testing/random_data.h"

namespace kvfleet::kernels {
namespace {

using ::kvfleet::testing::RandomFloats;

constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 16, kBlock = 4, kBlocks = 32;

struct Cache {
  explicit Cache(KvCacheDtype dtype = KvCacheDtype::kF16) : layout{kBlocks, kKvHeads, kBlock, kDim, dtype} {}
  KvCacheLayout layout;
  std::vector<uint8_t> k = std::vector<uint8_t>(layout.BytesPerLayer());
  std::vector<uint8_t> v = std::vector<uint8_t>(layout.BytesPerLayer());
};

// A float16 cache's row at (block, kv_head, slot).
const uint16_t* HalfRow(const KvCacheLayout& L, const uint8_t* cache, int64_t block, int64_t kv_head, int64_t slot) {
  return reinterpret_cast<const uint16_t*>(cache + L.RowOffset(block, kv_head, slot));
}

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

// The per-row kernel the tiles replaced, kept as the bit-exact reference:
// each (token, head) walks its context alone, converting every K and V row
// from float16 itself. The tiles must give these bits.
void AttendRowAlone(const PagedAttentionParams& p, int64_t token, int64_t head, float* out) {
  const KvCacheLayout& L = p.layout;
  const int64_t d = L.head_dim;
  const int64_t kv_head = head / (p.num_heads / L.num_kv_heads);
  const int64_t context = static_cast<int64_t>(p.where.positions[token]) + 1;
  const int32_t* table = p.where.block_table + p.where.token_chunk[token] * p.where.table_width;
  const float* q = p.q + (token * p.num_heads + head) * d;
  auto half8 = [](const uint16_t* h) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))); };
  std::vector<float> scores(context);
  float max_score = -INFINITY;
  for (int64_t j = 0; j < context; ++j) {
    const uint16_t* k = HalfRow(L, p.k_cache, table[j / L.block_size], kv_head, j % L.block_size);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), half8(k + i), acc);
    scores[j] = HorizontalSum(acc) * p.scale;
    max_score = std::max(max_score, scores[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < context; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  for (int64_t i = 0; i < d; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < context; ++j) {
      const uint16_t* v = HalfRow(L, p.v_cache, table[j / L.block_size], kv_head, j % L.block_size);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(scores[j]), half8(v + i), acc);
    }
    _mm256_storeu_ps(out + i, _mm256_div_ps(acc, _mm256_set1_ps(sum)));
  }
}

// A cache of any shape holding several sequences, and attention over any
// batch of their tokens: for the tests of how tiles are cut.
struct Sequences {
  int64_t heads, kv_heads, dim, block;
  KvCacheLayout layout;
  std::vector<uint8_t> k, v;
  std::vector<std::vector<int32_t>> tables;  // one per sequence
  std::vector<float> q;                      // [sequence][position][head][dim], flattened per sequence
  int64_t max_len;

  Sequences(int64_t heads, int64_t kv_heads, int64_t dim, int64_t block, const std::vector<int64_t>& lengths)
      : heads(heads), kv_heads(kv_heads), dim(dim), block(block) {
    max_len = *std::max_element(lengths.begin(), lengths.end());
    const int64_t per_seq = (max_len + block - 1) / block;
    layout = KvCacheLayout{per_seq * static_cast<int64_t>(lengths.size()), kv_heads, block, dim};
    k.resize(layout.BytesPerLayer());
    v.resize(layout.BytesPerLayer());
    q = RandomFloats(static_cast<int64_t>(lengths.size()) * max_len * heads * dim, 40, 2.0f);
    // Blocks handed out in an interleaved, reversed order, as a busy pool would.
    for (size_t s = 0; s < lengths.size(); ++s) {
      std::vector<int32_t> table(per_seq);
      for (int64_t b = 0; b < per_seq; ++b) {
        table[b] = static_cast<int32_t>((per_seq - 1 - b) * static_cast<int64_t>(lengths.size()) + s);
      }
      tables.push_back(table);
      const auto ks = RandomFloats(lengths[s] * kv_heads * dim, 50 + s, 2.0f);
      const auto vs = RandomFloats(lengths[s] * kv_heads * dim, 60 + s, 2.0f);
      std::vector<int32_t> positions(lengths[s]), chunk(lengths[s], 0);
      std::vector<int64_t> slots(lengths[s]);
      for (int64_t i = 0; i < lengths[s]; ++i) {
        positions[i] = static_cast<int32_t>(i);
        slots[i] = table[i / block] * block + i % block;
      }
      WriteKv(layout, {positions.data(), chunk.data(), table.data(), per_seq, slots.data()}, ks.data(), vs.data(),
              lengths[s], k.data(), v.data());
    }
  }

  // Causal attention for one token in double precision, from the float16 cache.
  std::vector<double> Reference(int32_t seq, int32_t pos) const {
    std::vector<double> out(heads * dim);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / (heads / kv_heads);
      const float* qh = q.data() + ((seq * max_len + pos) * heads + h) * dim;
      std::vector<double> s(pos + 1);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= pos; ++j) {
        const uint16_t* kr = HalfRow(layout, k.data(), tables[seq][j / block], g, j % block);
        double dot = 0;
        for (int64_t i = 0; i < dim; ++i) dot += qh[i] * static_cast<double>(HalfToFloat(kr[i]));
        s[j] = dot / std::sqrt(static_cast<double>(dim));
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j <= pos; ++j) {
        const uint16_t* vr = HalfRow(layout, v.data(), tables[seq][j / block], g, j % block);
        for (int64_t i = 0; i < dim; ++i) out[h * dim + i] += s[j] / sum * HalfToFloat(vr[i]);
      }
    }
    return out;
  }

  // Attention for the batch of (sequence, position) tokens, in that order.
  std::vector<float> Attend(const std::vector<std::pair<int32_t, int32_t>>& tokens, int threads) const {
    const int64_t n = static_cast<int64_t>(tokens.size());
    const int64_t width = static_cast<int64_t>(tables[0].size());
    std::vector<int32_t> positions(n), chunk(n), table;
    std::vector<int64_t> slots(n);
    std::vector<float> qs(n * heads * dim);
    for (int64_t t = 0; t < n; ++t) {
      const auto [seq, pos] = tokens[t];
      positions[t] = pos;
      chunk[t] = static_cast<int32_t>(t);  // one table row per token: rows of one sequence repeat
      table.insert(table.end(), tables[seq].begin(), tables[seq].end());
      slots[t] = tables[seq][pos / block] * block + pos % block;
      std::copy_n(q.begin() + ((seq * max_len + pos) * heads) * dim, heads * dim, qs.begin() + t * heads * dim);
    }
    // Tokens of one sequence that follow each other share a table row, as a chunk's do.
    for (int64_t t = 1; t < n; ++t) {
      if (tokens[t].first == tokens[t - 1].first) chunk[t] = chunk[t - 1];
    }
    std::vector<float> out(n * heads * dim);
    const PagedAttentionParams params{.layout = layout,
                                      .where = {positions.data(), chunk.data(), table.data(), width, slots.data()},
                                      .num_tokens = n,
                                      .num_heads = heads,
                                      .scale = 1.0f / std::sqrt(static_cast<float>(dim)),
                                      .q = qs.data(),
                                      .k_cache = k.data(),
                                      .v_cache = v.data(),
                                      .out = out.data()};
    if (threads == 0) {  // the per-row reference
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < heads; ++h) AttendRowAlone(params, t, h, out.data() + (t * heads + h) * dim);
      }
      return out;
    }
    ThreadPool pool(threads);
    PagedAttention(params, pool);
    return out;
  }
};

struct Shape {
  int64_t heads, kv_heads, dim, block;
};

class PagedAttentionTileTest : public ::testing::TestWithParam<Shape> {};

// Prefill chunks, verify chunks and decode tokens of three sequences in one
// batch: every token's output is bit-identical to attending it alone and to
// the per-row kernel, on one thread or two, whatever the tiles the batch was
// cut into.
TEST_P(PagedAttentionTileTest, EveryTokenMatchesItselfAloneBitForBit) {
  const Shape sh = GetParam();
  const Sequences seqs(sh.heads, sh.kv_heads, sh.dim, sh.block, {40, 23, 9});
  std::vector<std::pair<int32_t, int32_t>> batch;
  for (int32_t p = 3; p < 40; ++p) batch.push_back({0, p});   // a long prefill chunk
  batch.push_back({2, 8});                                     // a decode token
  for (int32_t p = 18; p < 23; ++p) batch.push_back({1, p});  // a verify chunk
  batch.push_back({2, 5});                                     // a token of an earlier sequence again
  const auto per_row = seqs.Attend(batch, /*threads=*/0);
  for (int threads : {1, 2}) {
    const auto together = seqs.Attend(batch, threads);
    const int64_t row = sh.heads * sh.dim;
    for (size_t e = 0; e < together.size(); ++e) {
      ASSERT_EQ(together[e], per_row[e]) << "element " << e << " against the per-row kernel, " << threads << " thread(s)";
    }
    for (size_t t = 0; t < batch.size(); ++t) {
      const auto alone = seqs.Attend({batch[t]}, 1);
      const auto reference = seqs.Reference(batch[t].first, batch[t].second);
      for (int64_t i = 0; i < row; ++i) {
        ASSERT_NEAR(alone[i], reference[i], 1e-4) << "token " << t << ", element " << i;
        ASSERT_EQ(together[t * row + i], alone[i])
            << "token " << t << " (sequence " << batch[t].first << ", position " << batch[t].second << "), element "
            << i << ", " << threads << " thread(s)";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTileTest,
                         ::testing::Values(Shape{4, 2, 16, 4},     // grouped heads, small blocks
                                           Shape{9, 3, 64, 16},    // SmolLM2-135M
                                           Shape{6, 6, 72, 8},     // no grouping; head_dim not a multiple of 64
                                           Shape{8, 2, 128, 16}),  // two passes over head_dim's chunks
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           const Shape& s = info.param;
                           return "h" + std::to_string(s.heads) + "kv" + std::to_string(s.kv_heads) + "d" +
                                  std::to_string(s.dim) + "b" + std::to_string(s.block);
                         });

// A context long enough that a tile's scores would pass the per-thread
// budget: tiles shrink to one token (and split their heads across threads),
// and the results stay the same bits.
TEST(PagedAttentionTest, ContextsPastTheScoreBudgetGiveTheSameBits) {
  const int64_t len = 70000;  // 2 heads per KV head × 70,000 > 131,072 scores
  const Sequences seqs(4, 2, 16, 64, {len});
  const std::vector<std::pair<int32_t, int32_t>> batch = {{0, len - 3}, {0, len - 2}, {0, len - 1}};
  const auto together = seqs.Attend(batch, 2);
  const auto per_row = seqs.Attend(batch, /*threads=*/0);
  for (size_t e = 0; e < together.size(); ++e) ASSERT_EQ(together[e], per_row[e]) << "element " << e;
  for (size_t t = 0; t < batch.size(); ++t) {
    const auto alone = seqs.Attend({batch[t]}, 1);
    for (int64_t i = 0; i < 4 * 16; ++i) ASSERT_EQ(together[t * 64 + i], alone[i]) << "token " << t << " element " << i;
  }
}

// With a single key, attention returns its V row as decoded: every FP8 code
// and every int8 value come back as kv_format.h defines them.
TEST(PagedAttentionTest, EightBitRowsDecodeAsTheirFormatDefines) {
  constexpr int64_t kWide = 256;
  for (KvCacheDtype dtype : {KvCacheDtype::kFp8E4M3, KvCacheDtype::kInt8}) {
    SCOPED_TRACE(std::string(KvCacheDtypeName(dtype)));
    const KvCacheLayout layout{.num_blocks = 1, .num_kv_heads = 1, .block_size = 4, .head_dim = kWide, .dtype = dtype};
    std::vector<uint8_t> k(layout.BytesPerLayer(), 0), v(layout.BytesPerLayer(), 0);
    uint8_t* row = v.data() + layout.RowOffset(0, 0, 0);
    for (int i = 0; i < kWide; ++i) row[i] = static_cast<uint8_t>(i);
    const uint16_t scale = FloatToHalf(0.0371f);
    if (dtype == KvCacheDtype::kInt8) {
      row[128] = 0x81;  // -127: -128 (0x80) is never written
      std::memcpy(v.data() + layout.ScaleOffset(0, 0, 0), &scale, 2);
      std::memcpy(k.data() + layout.ScaleOffset(0, 0, 0), &scale, 2);
    }
    const int32_t position = 0, chunk = 0, table = 0;
    const int64_t slot = 0;
    std::vector<float> q(kWide, 0.5f), out(kWide);
    ThreadPool pool(1);
    PagedAttention({.layout = layout,
                    .where = {&position, &chunk, &table, 1, &slot},
                    .num_tokens = 1,
                    .num_heads = 1,
                    .scale = 0.125f,
                    .q = q.data(),
                    .k_cache = k.data(),
                    .v_cache = v.data(),
                    .out = out.data()},
                   pool);
    for (int i = 0; i < kWide; ++i) {
      const float want = dtype == KvCacheDtype::kFp8E4M3
                             ? Fp8E4M3ToFloat(row[i])
                             : static_cast<float>(static_cast<int8_t>(row[i])) * HalfToFloat(scale);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(out[i])) << "code " << i;
      } else {
        EXPECT_EQ(out[i], want) << "code " << i;
      }
    }
  }
}

// Keys with one large channel, as a K bias gives them: a row scale sized
// for it leaves the other channels few int8 levels. Rotated keys spread it
// over the row, so attention lands much closer to float16's; the query is
// rotated alike, so without the outlier both stay close.
TEST(PagedAttentionTest, RotatedKeysSpreadAnOutlierChannel) {
  const int64_t len = 24;
  auto k = RandomFloats(len * kKvHeads * kDim, 11, 1.0f);
  const auto v = RandomFloats(len * kKvHeads * kDim, 12, 1.0f);
  const auto q = RandomFloats(len * kHeads * kDim, 13, 1.0f);
  for (int64_t r = 0; r < len * kKvHeads; ++r) k[r * kDim + 3] += 40.0f;
  const std::vector<int32_t> table = {3, 8, 1, 6, 2, 9};
  auto error = [&](KvCacheDtype dtype) {
    Cache exact, coded(dtype);
    const auto want = Attend(exact, table, k, v, q, len, len);
    const auto got = Attend(coded, table, k, v, q, len, len);
    double sq = 0, ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      sq += (got[i] - want[i]) * (got[i] - want[i]);
      ref += want[i] * want[i];
    }
    return std::sqrt(sq / ref);
  };
  const double plain = error(KvCacheDtype::kInt8), rotated = error(KvCacheDtype::kInt8Rotated);
  EXPECT_LT(rotated, plain / 2) << "int8 " << plain << ", int8_rotated " << rotated;
  EXPECT_LT(rotated, 0.02);
}

// The rotated layout is whole-row int8 on the wire: a row's bytes and scale
// are where kInt8 puts them, and the key rows hold H·k, not k.
TEST(PagedAttentionTest, RotatedKeyRowsHoldTheTransformedRow) {
  const int64_t len = 1;
  const auto k = RandomFloats(kKvHeads * kDim, 21, 1.0f), v = RandomFloats(kKvHeads * kDim, 22, 1.0f);
  const auto q = RandomFloats(kHeads * kDim, 23, 1.0f);
  Cache plain(KvCacheDtype::kInt8), rotated(KvCacheDtype::kInt8Rotated);
  Attend(plain, {0}, k, v, q, len, len);
  Attend(rotated, {0}, k, v, q, len, len);
  EXPECT_EQ(plain.v, rotated.v) << "value rows are plain int8";
  std::vector<float> hk(k.begin(), k.begin() + kDim);
  HadamardBlocks(hk.data(), kDim, KvRotationBlock(kDim));
  uint16_t scale_bits;
  std::memcpy(&scale_bits, rotated.k.data() + rotated.layout.ScaleOffset(0, 0, 0), 2);
  const float scale = HalfToFloat(scale_bits);
  const int8_t* row = reinterpret_cast<const int8_t*>(rotated.k.data() + rotated.layout.RowOffset(0, 0, 0));
  for (int64_t i = 0; i < kDim; ++i) EXPECT_EQ(row[i], QuantizeInt8(hk[i], scale)) << i;
}

}  // namespace
}  // namespace kvfleet::kernels
