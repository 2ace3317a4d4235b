#include "kernels/cpu/paged_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/check.h"
#include "common/float16.h"
#include "kernels/cpu/simd.h"

namespace kvfleet::kernels {
namespace {

// A tile is up to this many consecutive tokens of one sequence, times the
// query heads that share one KV head: they all read each K/V row once.
constexpr int64_t kMaxTileTokens = 8;
// The scores a thread keeps for its tile (rows × context), in floats. A
// longer context gets smaller tiles, down to one token.
constexpr int64_t kScoreBudget = int64_t{1} << 17;

inline __m256 LoadHalf8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

struct ThreadScratch {
  std::vector<float> scores;  // [rows, tile context]
  std::vector<float> acc;     // [rows, head_dim] weighted V sums, then [rows] softmax sums
  std::vector<float> kv;      // one cache block of K or V, as float32
  std::vector<float> q;       // [rows, head_dim] the tile's queries, scaled and rotated as the keys are
};

ThreadScratch& Scratch() {
  thread_local ThreadScratch s;
  return s;
}

// The rows of one tile: tokens [t0, t1) of one sequence, query heads
// [h0, h0 + heads) of one KV head. Row r is token t0 + r / heads, head
// h0 + r % heads.
struct Tile {
  int64_t t0, t1;
  int64_t kv_head;
  int64_t h0, heads;
  int64_t rows() const { return (t1 - t0) * heads; }
};

// Grows, never shrinks: once reserved, a warm step does not allocate.
void GrowTo(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// The first `count` K or V rows of one (block, KV head), as float32: the
// layout keeps them contiguous. Each element's value is the codec's
// (kv_format.h), exactly: an int8 row is q · scale, one rounding.
void LoadBlock(const KvCacheLayout& L, const uint8_t* cache, int64_t block, int64_t kv_head, int64_t count,
               float* kv) {
  const int64_t d = L.head_dim;
  const uint8_t* rows = cache + L.RowOffset(block, kv_head, 0);
  switch (L.dtype) {
    case KvCacheDtype::kF16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(rows);
      for (int64_t i = 0; i < count * d; i += 8) _mm256_storeu_ps(kv + i, LoadHalf8(h + i));
      return;
    }
    case KvCacheDtype::kInt8:
    case KvCacheDtype::kInt8Rotated:
    case KvCacheDtype::kInt8RotatedScaled: {  // int8 rows (a key's rotated: the query is too)
      const uint16_t* scales = reinterpret_cast<const uint16_t*>(cache + L.ScaleOffset(block, kv_head, 0));
      for (int64_t j = 0; j < count; ++j) {
        const __m256 scale = _mm256_set1_ps(HalfToFloat(scales[j]));
        for (int64_t i = 0; i < d; i += 8) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows + j * d + i));
          _mm256_storeu_ps(kv + j * d + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), scale));
        }
      }
      return;
    }
    case KvCacheDtype::kFp8E4M3: {
      // E4M3 placed in binary16's fields, (b & 0x7F) << 7 with the sign on
      // top, is the value · 2^-8 (subnormals included): the hardware
      // converter and one exact multiply decode eight at a time. 0x7F is
      // NaN in E4M3, not 480.
      const __m128i magnitude = _mm_set1_epi16(0x7F), sign = _mm_set1_epi16(0x80);
      const __m256 k256 = _mm256_set1_ps(256.0f), nan = _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());
      for (int64_t i = 0; i < count * d; i += 8) {
        const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows + i)));
        const __m128i m = _mm_and_si128(b, magnitude);
        const __m128i h = _mm_or_si128(_mm_slli_epi16(m, 7), _mm_slli_epi16(_mm_and_si128(b, sign), 8));
        const __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(h), k256);
        const __m256 is_nan = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(m, magnitude)));
        _mm256_storeu_ps(kv + i, _mm256_blendv_ps(v, nan, is_nan));
      }
      return;
    }
  }
}

// scores[j] = (q · k_j) · scale for the block's positions j < count. Each
// dot product walks head_dim in steps of 8 with one accumulator, then
// HorizontalSum: the order of Dot8, whatever the tile. Four positions at a
// time keep four independent FMA chains in flight.
void ScoreBlock(const float* q, const float* k, int64_t count, int64_t d, float scale, float* scores) {
  int64_t j = 0;
  for (; j + 4 <= count; j += 4) {
    const float* k0 = k + j * d;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + i), a0);
      a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + d + i), a1);
      a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 2 * d + i), a2);
      a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 3 * d + i), a3);
    }
    scores[j] = HorizontalSum(a0) * scale;
    scores[j + 1] = HorizontalSum(a1) * scale;
    scores[j + 2] = HorizontalSum(a2) * scale;
    scores[j + 3] = HorizontalSum(a3) * scale;
  }
  for (; j < count; ++j) scores[j] = Dot8(q, k + j * d, static_cast<int>(d)) * scale;
}

// acc[c] = fma(w_j, v_j[c], acc[c]) for the block's positions j < count in
// order, for C consecutive 8-wide chunks of head_dim held in registers.
template <int C>
void AccumulateChunks(const float* weights, const float* v, int64_t count, int64_t d, float* acc) {
  __m256 a[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) a[c] = _mm256_loadu_ps(acc + 8 * c);
  for (int64_t j = 0; j < count; ++j) {
    const __m256 w = _mm256_set1_ps(weights[j]);
    const float* vj = v + j * d;
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) a[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 8 * c), a[c]);
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc + 8 * c, a[c]);
}

void AccumulateBlock(const float* weights, const float* v, int64_t count, int64_t d, float* acc) {
  for (int64_t c0 = 0; c0 < d / 8; c0 += 8) {
    const float* vc = v + 8 * c0;
    float* ac = acc + 8 * c0;
    switch (std::min<int64_t>(8, d / 8 - c0)) {
      case 1: AccumulateChunks<1>(weights, vc, count, d, ac); break;
      case 2: AccumulateChunks<2>(weights, vc, count, d, ac); break;
      case 3: AccumulateChunks<3>(weights, vc, count, d, ac); break;
      case 4: AccumulateChunks<4>(weights, vc, count, d, ac); break;
      case 5: AccumulateChunks<5>(weights, vc, count, d, ac); break;
      case 6: AccumulateChunks<6>(weights, vc, count, d, ac); break;
      case 7: AccumulateChunks<7>(weights, vc, count, d, ac); break;
      default: AccumulateChunks<8>(weights, vc, count, d, ac); break;
    }
  }
}

// Every (token, head) row of the tile: a pass over its sequence's blocks
// for the scores, softmax row by row, then a pass for the weighted sum of
// V. Each row's
// arithmetic is the single-row algorithm's, in the same order (positions
// ascending, each block converted from float16 once for all rows), so a
// row's result does not depend on which other rows share its tile.
void AttendTile(const PagedAttentionParams& p, const Tile& tile, ThreadScratch& s) {
  const KvCacheLayout& L = p.layout;
  const int64_t d = L.head_dim, bs = L.block_size, rows = tile.rows();
  const int32_t* table = p.where.block_table + p.where.token_chunk[tile.t0] * p.where.table_width;
  // Row r sees keys [row_first(r), row_context(r)), except, in a tree
  // verify chunk, the nodes off its path (masked below).
  auto row_position = [&](int64_t r) { return static_cast<int64_t>(p.where.positions[tile.t0 + r / tile.heads]); };
  auto row_mask = [&](int64_t r) {
    return p.where.tree_masks != nullptr ? p.where.tree_masks[tile.t0 + r / tile.heads] : 0;
  };
  auto row_context = [&](int64_t r) { return TreeKeyEnd(row_position(r), row_mask(r)); };
  auto row_first = [&](int64_t r) { return p.window > 0 ? std::max<int64_t>(0, row_position(r) + 1 - p.window) : 0; };
  auto row_offset = [&](int64_t r) { return ((tile.t0 + r / tile.heads) * p.num_heads + tile.h0 + r % tile.heads) * d; };
  int64_t context = 0, first = INT64_MAX;  // the tile's longest context and earliest visible key
  for (int64_t r = 0; r < rows; r += tile.heads) {
    context = std::max(context, row_context(r));
    first = std::min(first, row_first(r));
  }
  const int64_t first_block = first / bs * bs;
  GrowTo(s.scores, rows * context);
  GrowTo(s.acc, rows * (d + 1));
  GrowTo(s.kv, bs * d);
  float* scores = s.scores.data();
  float* kv = s.kv.data();
  // Rotated keys: each query row rotated alike (after its channels are
  // scaled as its KV head's keys were, inversely), the scores scaled by 1/n.
  const bool rotated = KvRotatesKeys(L.dtype);
  const float scale = rotated ? p.scale / static_cast<float>(KvRotationBlock(d)) : p.scale;
  if (rotated) {
    GrowTo(s.q, rows * d);
    const float* channel_scales = KvScalesKeyChannels(L.dtype) ? p.key_scales + tile.kv_head * d : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      float* q = s.q.data() + r * d;
      std::copy(p.q + row_offset(r), p.q + row_offset(r) + d, q);
      if (channel_scales != nullptr) {
        for (int64_t i = 0; i < d; ++i) q[i] *= channel_scales[i];
      }
      HadamardBlocks(q, d, KvRotationBlock(d));
    }
  }
  auto query = [&](int64_t r) { return rotated ? s.q.data() + r * d : p.q + row_offset(r); };

  // Each row's keys of the block [b0, b0 + in_block): [j0, j1).
  auto visible = [&](int64_t r, int64_t b0, int64_t in_block, int64_t* j0) {
    *j0 = std::max(b0, row_first(r));
    return std::min(b0 + in_block, row_context(r)) - *j0;
  };
  for (int64_t b0 = first_block; b0 < context; b0 += bs) {
    const int64_t in_block = std::min(bs, context - b0);
    LoadBlock(L, p.k_cache, table[b0 / bs], tile.kv_head, in_block, kv);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t j0;
      const int64_t count = visible(r, b0, in_block, &j0);
      if (count > 0) ScoreBlock(query(r), kv + (j0 - b0) * d, count, d, scale, scores + r * context + j0);
    }
  }
  float* acc = s.acc.data();
  float* row_sums = acc + rows * d;
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = scores + r * context;
    const int64_t lo = row_first(r), n = row_context(r);
    // Off-path tree nodes weigh exp(−inf) = 0: the sums below then add the
    // path's terms in plain decoding's order, and exact zeros between them.
    if (const uint64_t mask = row_mask(r); mask != 0) {
      for (int64_t j = TreeBase(row_position(r), mask) + 1; j < n; ++j) {
        if (!TreeSees(j, row_position(r), mask)) sr[j] = -INFINITY;
      }
    }
    float max_score = -INFINITY;
    for (int64_t j = lo; j < n; ++j) max_score = std::max(max_score, sr[j]);
    float sum = 0.0f;
    for (int64_t j = lo; j < n; ++j) {
      sr[j] = std::exp(sr[j] - max_score);
      sum += sr[j];
    }
    row_sums[r] = sum;
  }
  std::fill(acc, acc + rows * d, 0.0f);
  for (int64_t b0 = first_block; b0 < context; b0 += bs) {
    const int64_t in_block = std::min(bs, context - b0);
    LoadBlock(L, p.v_cache, table[b0 / bs], tile.kv_head, in_block, kv);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t j0;
      const int64_t count = visible(r, b0, in_block, &j0);
      if (count > 0) AccumulateBlock(scores + r * context + j0, kv + (j0 - b0) * d, count, d, acc + r * d);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* out = p.out + row_offset(r);
    const __m256 sum = _mm256_set1_ps(row_sums[r]);
    for (int64_t i = 0; i < d; i += 8) _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_loadu_ps(acc + r * d + i), sum));
  }
}

}  // namespace

namespace {

// One row of head_dim values into the cache in the layout's dtype.
void StoreRow(const KvCacheLayout& L, const float* x, int64_t block, int64_t kv_head, int64_t slot, uint8_t* cache) {
  const int64_t d = L.head_dim;
  uint8_t* row = cache + L.RowOffset(block, kv_head, slot);
  switch (L.dtype) {
    case KvCacheDtype::kF16: {
      uint16_t* h = reinterpret_cast<uint16_t*>(row);
      for (int64_t i = 0; i < d; ++i) h[i] = FloatToHalf(x[i]);
      return;
    }
    case KvCacheDtype::kInt8:
    case KvCacheDtype::kInt8Rotated:
    case KvCacheDtype::kInt8RotatedScaled: {  // a key row arrives scaled and rotated (WriteKv)
      float max_abs = 0.0f;
      for (int64_t i = 0; i < d; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
      const uint16_t scale_bits = FloatToHalf(max_abs / static_cast<float>(kInt8KvMax));
      *reinterpret_cast<uint16_t*>(cache + L.ScaleOffset(block, kv_head, slot)) = scale_bits;
      const float scale = HalfToFloat(scale_bits);
      for (int64_t i = 0; i < d; ++i) row[i] = static_cast<uint8_t>(QuantizeInt8(x[i], scale));
      return;
    }
    case KvCacheDtype::kFp8E4M3:
      for (int64_t i = 0; i < d; ++i) row[i] = FloatToFp8E4M3(x[i]);
      return;
  }
}

}  // namespace

void WriteKv(const KvCacheLayout& layout, const TokenPlacement& where, const float* k, const float* v,
             int64_t num_tokens, uint8_t* k_cache, uint8_t* v_cache, const float* key_scales) {
  const int64_t d = layout.head_dim;
  const bool rotate = KvRotatesKeys(layout.dtype);
  const bool scale_channels = KvScalesKeyChannels(layout.dtype);
  CHECK(!scale_channels || key_scales != nullptr) << "int8_rotated_scaled needs key scales";
  // A rotated key row, on the stack for the usual heads (no allocation in a
  // warm step); a heap row only past 512.
  float stack_row[512];
  std::vector<float> heap_row(rotate && d > 512 ? static_cast<size_t>(d) : 0);
  float* rotated = d > 512 ? heap_row.data() : stack_row;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = where.kv_slots[t];
    for (int64_t h = 0; h < layout.num_kv_heads; ++h) {
      const int64_t row = (t * layout.num_kv_heads + h) * d;
      const float* key = k + row;
      if (rotate) {
        std::copy(key, key + d, rotated);
        if (scale_channels) {  // exact: each scale is a power of two
          for (int64_t i = 0; i < d; ++i) rotated[i] /= key_scales[h * d + i];
        }
        HadamardBlocks(rotated, d, KvRotationBlock(d));
        key = rotated;
      }
      StoreRow(layout, key, slot / layout.block_size, h, slot % layout.block_size, k_cache);
      StoreRow(layout, v + row, slot / layout.block_size, h, slot % layout.block_size, v_cache);
    }
  }
}

void MoveKvRows(const KvCacheLayout& layout, std::span<const int64_t> from, std::span<const int64_t> to,
                uint8_t* cache) {
  const int64_t bs = layout.block_size;
  for (size_t i = 0; i < from.size(); ++i) {
    for (int64_t h = 0; h < layout.num_kv_heads; ++h) {
      std::memmove(cache + layout.RowOffset(to[i] / bs, h, to[i] % bs),
                   cache + layout.RowOffset(from[i] / bs, h, from[i] % bs), static_cast<size_t>(layout.RowBytes()));
      if (KvRowScaleBytes(layout.dtype) > 0) {
        std::memmove(cache + layout.ScaleOffset(to[i] / bs, h, to[i] % bs),
                     cache + layout.ScaleOffset(from[i] / bs, h, from[i] % bs),
                     static_cast<size_t>(KvRowScaleBytes(layout.dtype)));
      }
    }
  }
}

namespace {

// How the batch is cut into tiles: windows of `tokens` consecutive batch
// tokens (split further where the sequence changes), times KV heads, times
// `head_parts` slices of each KV head's query heads. None of it changes a
// row's arithmetic; it only trades sharing of K/V reads for parallelism.
struct TileShape {
  int64_t tokens = 1;
  int64_t head_parts = 1;
};

TileShape ChooseTiles(const PagedAttentionParams& p, int64_t group, int threads) {
  int64_t longest = 1;
  for (int64_t t = 0; t < p.num_tokens; ++t) {
    const uint64_t mask = p.where.tree_masks != nullptr ? p.where.tree_masks[t] : 0;
    longest = std::max<int64_t>(longest, TreeKeyEnd(p.where.positions[t], mask));
  }
  TileShape shape;
  shape.tokens = std::clamp<int64_t>(kScoreBudget / (group * longest), 1, kMaxTileTokens);
  const int64_t want = 2 * static_cast<int64_t>(threads);  // items per thread, for balance
  auto items = [&] { return (p.num_tokens + shape.tokens - 1) / shape.tokens * p.layout.num_kv_heads * shape.head_parts; };
  while (shape.tokens > 1 && items() < want) shape.tokens = (shape.tokens + 1) / 2;
  while (shape.head_parts < group && items() < want) ++shape.head_parts;
  return shape;
}

}  // namespace

void PagedAttention(const PagedAttentionParams& p, ThreadPool& pool) {
  if (p.num_tokens == 0) return;
  CHECK(!KvScalesKeyChannels(p.layout.dtype) || p.key_scales != nullptr) << "int8_rotated_scaled needs key scales";
  const int64_t group = p.num_heads / p.layout.num_kv_heads;
  // Everything the workers need behind one pointer: a lambda capturing more
  // would make ParallelFor's std::function allocate.
  struct Job {
    const PagedAttentionParams& p;
    int64_t group;
    TileShape shape;
    int64_t windows;
  };
  const TileShape shape = ChooseTiles(p, group, pool.num_threads());
  const Job job{p, group, shape, (p.num_tokens + shape.tokens - 1) / shape.tokens};
  const Job* j = &job;
  const int64_t per_window = p.layout.num_kv_heads * shape.head_parts;
  pool.ParallelFor(job.windows * per_window, [j](int64_t begin, int64_t end) {
    const PagedAttentionParams& p = j->p;
    const int64_t parts = j->shape.head_parts;
    const int64_t heads_per_part = (j->group + parts - 1) / parts;
    ThreadScratch& s = Scratch();
    for (int64_t w = begin; w < end; ++w) {
      const int64_t window = w / (p.layout.num_kv_heads * parts);
      const int64_t kv_head = w / parts % p.layout.num_kv_heads;
      const int64_t part = w % parts;
      const int64_t h_first = part * heads_per_part;
      const int64_t h_count = std::min(heads_per_part, j->group - h_first);
      if (h_count <= 0) continue;
      const int64_t t_end = std::min(p.num_tokens, (window + 1) * j->shape.tokens);
      for (int64_t t0 = window * j->shape.tokens; t0 < t_end;) {
        int64_t t1 = t0 + 1;
        while (t1 < t_end && p.where.token_chunk[t1] == p.where.token_chunk[t0]) ++t1;
        AttendTile(p, Tile{t0, t1, kv_head, kv_head * j->group + h_first, h_count}, s);
        t0 = t1;
      }
    }
  });
}

void ReservePagedAttentionScratch(int64_t max_context, int64_t heads_per_kv_head, int64_t head_dim,
                                  int64_t block_size) {
  ThreadScratch& s = Scratch();
  s.scores.reserve(static_cast<size_t>(std::max(kScoreBudget, heads_per_kv_head * max_context)));
  s.acc.reserve(static_cast<size_t>(kMaxTileTokens * heads_per_kv_head * (head_dim + 1)));
  s.kv.reserve(static_cast<size_t>(block_size * head_dim));
  s.q.reserve(static_cast<size_t>(kMaxTileTokens * heads_per_kv_head * head_dim));
}

}  // namespace kvfleet::kernels
