#include "kernels/cpu/paged_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/float16.h"
#include "kernels/cpu/simd.h"

namespace kvfleet::kernels {
namespace {

inline __m256 LoadHalf8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Σ q[i]·k[i] with k in float16; same accumulation order as Dot8.
inline float DotHalf(const float* q, const uint16_t* k, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), LoadHalf8(k + i), acc);
  return HorizontalSum(acc);
}

void AttendOne(const PagedAttentionParams& p, int64_t token, int64_t head, std::vector<float>& scores) {
  const KvCacheLayout& L = p.layout;
  const int64_t d = L.head_dim;
  const int64_t kv_head = head / (p.num_heads / L.num_kv_heads);
  const int64_t context = static_cast<int64_t>(p.where.positions[token]) + 1;
  const int32_t* table = p.where.block_table + p.where.token_chunk[token] * p.where.table_width;
  const float* q = p.q + (token * p.num_heads + head) * d;
  scores.resize(static_cast<size_t>(context));

  float max_score = -INFINITY;
  for (int64_t j = 0; j < context; ++j) {
    const int64_t off = L.Offset(table[j / L.block_size], kv_head, j % L.block_size);
    scores[j] = DotHalf(q, p.k_cache + off, d) * p.scale;
    max_score = std::max(max_score, scores[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < context; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  float* out = p.out + (token * p.num_heads + head) * d;
  for (int64_t i = 0; i < d; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < context; ++j) {
      const int64_t off = L.Offset(table[j / L.block_size], kv_head, j % L.block_size);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(scores[j]), LoadHalf8(p.v_cache + off + i), acc);
    }
    _mm256_storeu_ps(out + i, _mm256_div_ps(acc, _mm256_set1_ps(sum)));
  }
}

}  // namespace

void WriteKv(const KvCacheLayout& layout, const TokenPlacement& where, const float* k, const float* v,
             int64_t num_tokens, uint16_t* k_cache, uint16_t* v_cache) {
  const int64_t d = layout.head_dim;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = where.kv_slots[t];
    for (int64_t h = 0; h < layout.num_kv_heads; ++h) {
      const int64_t off = layout.Offset(slot / layout.block_size, h, slot % layout.block_size);
      const float* ks = k + (t * layout.num_kv_heads + h) * d;
      const float* vs = v + (t * layout.num_kv_heads + h) * d;
      for (int64_t i = 0; i < d; ++i) {
        k_cache[off + i] = FloatToHalf(ks[i]);
        v_cache[off + i] = FloatToHalf(vs[i]);
      }
    }
  }
}

namespace {

std::vector<float>& Scores() {
  thread_local std::vector<float> scores;
  return scores;
}

}  // namespace

void PagedAttention(const PagedAttentionParams& p, ThreadPool& pool) {
  const int64_t work = p.num_tokens * p.num_heads;
  pool.ParallelFor(work, [&p](int64_t begin, int64_t end) {
    std::vector<float>& scores = Scores();
    for (int64_t w = begin; w < end; ++w) AttendOne(p, w / p.num_heads, w % p.num_heads, scores);
  });
}

void ReservePagedAttentionScratch(int64_t max_context) { Scores().reserve(static_cast<size_t>(max_context)); }

}  // namespace kvfleet::kernels
