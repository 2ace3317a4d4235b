#include "kernels/cuda/paged_attention.h"

#include "kernels/cuda/cuda_compat.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

constexpr int kThreads = 128;
// The longest head a rotated key row is (paged attention's head dims go to 256).
constexpr int kMaxRotatedHeadDim = 256;

// Eight float16 values at p (16-byte aligned) as floats.
__device__ __forceinline__ void LoadHalf8(const uint16_t* p, float* out) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  KVFLEET_UNROLL
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = ::kvfleet::cuda::HalfBitsToFloat(static_cast<uint16_t>(words[i] & 0xffffu));
    out[2 * i + 1] = ::kvfleet::cuda::HalfBitsToFloat(static_cast<uint16_t>(words[i] >> 16));
  }
}

// Where key j's row of one KV head sits in a layer's cache: the row's byte
// offset, and (kInt8) its scale's.
struct RowAt {
  int64_t row;
  int64_t scale;
};

__device__ __forceinline__ RowAt CacheRow(const KvCacheLayout& L, const int32_t* table, int64_t j, int64_t kv_head) {
  const int64_t block = table[j / L.block_size];  // widened before the strides multiply it
  const int64_t slot = j % L.block_size;
  return {L.RowOffset(block, kv_head, slot), L.ScaleOffset(block, kv_head, slot)};
}

// Elements [8c, 8c + 8) of a cached row as floats: the codec's values
// exactly (kv_format.h), as kernels/cpu decodes them.
__device__ __forceinline__ void LoadRow8(const KvCacheLayout& L, const uint8_t* cache, RowAt at, int c, float* out) {
  switch (L.dtype) {
    case KvCacheDtype::kF16:
      LoadHalf8(reinterpret_cast<const uint16_t*>(cache + at.row) + c * 8, out);
      return;
    case KvCacheDtype::kInt8:
    case KvCacheDtype::kInt8Rotated:
    case KvCacheDtype::kInt8RotatedScaled: {  // int8 rows (a key's rotated: the query is too)
      const uint2 v = *reinterpret_cast<const uint2*>(cache + at.row + c * 8);
      const float scale = ::kvfleet::cuda::HalfBitsToFloat(*reinterpret_cast<const uint16_t*>(cache + at.scale));
      const uint32_t words[2] = {v.x, v.y};
      KVFLEET_UNROLL
      for (int i = 0; i < 8; ++i) {
        const int8_t q = static_cast<int8_t>((words[i / 4] >> (8 * (i % 4))) & 0xffu);
        out[i] = __fmul_rn(static_cast<float>(q), scale);
      }
      return;
    }
    case KvCacheDtype::kFp8E4M3: {
      const uint2 v = *reinterpret_cast<const uint2*>(cache + at.row + c * 8);
      const uint32_t words[2] = {v.x, v.y};
      KVFLEET_UNROLL
      for (int i = 0; i < 8; ++i) out[i] = Fp8E4M3ToFloat(static_cast<uint8_t>((words[i / 4] >> (8 * (i % 4))) & 0xffu));
      return;
    }
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) PartitionKernel(PagedAttentionParams p, int32_t first_item) {
  constexpr int kDimLanes = D / 8;               // threads that share one key's V row in the o sums
  constexpr int kSubsets = kThreads / kDimLanes;
  __shared__ float q_s[kMaxTileRows][D];
  __shared__ float scores[kMaxTileRows][kPartitionTokens];
  __shared__ float row_m[kMaxTileRows];
  __shared__ float row_l[kMaxTileRows];
  __shared__ float combine[kSubsets][D];

  const AttentionWorkItem item = p.items[first_item + static_cast<int32_t>(blockIdx.x)];
  const int64_t kv_head = blockIdx.y;
  const int group = static_cast<int>(p.num_heads / p.layout.num_kv_heads);
  const int rows = item.tokens * group;
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t key_begin = static_cast<int64_t>(item.partition) * kPartitionTokens;
  const int64_t last_position = p.where.positions[item.first_token + item.tokens - 1];
  const int64_t key_end = key_begin + kPartitionTokens < last_position + 1 ? key_begin + kPartitionTokens
                                                                           : last_position + 1;
  const int32_t* table = p.where.block_table + p.where.token_chunk[item.first_token] * p.where.table_width;
  // A tree verify chunk's token is a tile of its own (attention_plan.h):
  // its keys are its path's, read through TreeKeyIndex, so every reduction
  // runs over the same keys in the same lanes as plain decoding of the path.
  const uint64_t tree_mask = p.where.tree_masks != nullptr ? p.where.tree_masks[item.first_token] : 0;
  // A partition before every row's window (the tile's first token has the
  // earliest one): nothing to do, and no row combines it.
  if (item.partition < FirstPartitionFor(p.where.positions[item.first_token], p.window)) return;

  // Row r is token first_token + r / group, query head kv_head · group + r % group.
  for (int idx = tid; idx < rows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    const int64_t t = item.first_token + r / group, h = kv_head * group + r % group;
    q_s[r][d] = p.q[(t * p.num_heads + h) * D + d];
  }
  __syncthreads();
  // Rotated keys (kv_format.h): each query row scaled by its KV head's
  // key channel scales (int8_rotated_scaled) and rotated alike, the scores
  // scaled by 1/n (exact: a power of two).
  const bool rotated = KvRotatesKeys(p.layout.dtype);
  const float score_scale = rotated ? __fdiv_rn(p.scale, static_cast<float>(KvRotationBlock(D))) : p.scale;
  if (rotated) {
    if (tid < rows) {
      if (KvScalesKeyChannels(p.layout.dtype)) {
        for (int d = 0; d < D; ++d) q_s[tid][d] = __fmul_rn(q_s[tid][d], p.key_scales[kv_head * D + d]);
      }
      HadamardBlocks(q_s[tid], D, KvRotationBlock(D));
    }
    __syncthreads();
  }

  // Scores: thread `tid` takes keys key_begin + tid, + 128, ...; each key's
  // row is read once and dotted with every query row, element by element.
  __shared__ int64_t row_position[kMaxTileRows];
  __shared__ int64_t row_first[kMaxTileRows];  // the row's first visible key
  if (tid < rows) {
    row_position[tid] = p.where.positions[item.first_token + tid / group];
    row_first[tid] = p.window > 0 && row_position[tid] >= p.window ? row_position[tid] - p.window + 1 : 0;
  }
  __syncthreads();
  for (int64_t j = key_begin + tid; j < key_end; j += kThreads) {
    const RowAt k_row = CacheRow(p.layout, table, TreeKeyIndex(j, last_position, tree_mask), kv_head);
    float dot[kMaxTileRows];
    KVFLEET_UNROLL
    for (int r = 0; r < kMaxTileRows; ++r) dot[r] = 0.0f;
    for (int c = 0; c < D / 8; ++c) {
      float k[8];
      LoadRow8(p.layout, p.k_cache, k_row, c, k);
      KVFLEET_UNROLL
      for (int r = 0; r < kMaxTileRows; ++r) {
        if (r < rows) {
          KVFLEET_UNROLL
          for (int e = 0; e < 8; ++e) dot[r] = __fmaf_rn(q_s[r][c * 8 + e], k[e], dot[r]);
        }
      }
    }
    KVFLEET_UNROLL
    for (int r = 0; r < kMaxTileRows; ++r) {
      if (r < rows) {
        scores[r][j - key_begin] =
            j <= row_position[r] && j >= row_first[r] ? __fmul_rn(dot[r], score_scale) : -INFINITY;
      }
    }
  }
  __syncthreads();

  // Max and sum of exponentials per row: warp w takes rows w, w + 4, ...
  const int keys = static_cast<int>(key_end - key_begin);
  const int warp = tid / 32, lane = tid % 32;
  for (int r = warp; r < rows; r += kThreads / 32) {
    float m = -INFINITY;
    for (int j = lane; j < keys; j += 32) m = fmaxf(m, scores[r][j]);
    m = ::kvfleet::cuda::GroupMax(m, 32);
    float l = 0.0f;
    for (int j = lane; j < keys; j += 32) {
      const float e = m == -INFINITY ? 0.0f : expf(__fsub_rn(scores[r][j], m));
      scores[r][j] = e;
      l = __fadd_rn(l, e);
    }
    l = ::kvfleet::cuda::GroupSum(l, 32);
    if (lane == 0) {
      row_m[r] = m;
      row_l[r] = l;
    }
  }
  __syncthreads();

  // o per row: thread (dim_lane, subset) over keys j ≡ subset (mod kSubsets).
  const int dim_lane = tid % kDimLanes, subset = tid / kDimLanes;
  for (int r = 0; r < rows; ++r) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = key_begin + subset; j < key_end; j += kSubsets) {
      const float e = scores[r][j - key_begin];
      float v[8];
      LoadRow8(p.layout, p.v_cache, CacheRow(p.layout, table, TreeKeyIndex(j, last_position, tree_mask), kv_head),
               dim_lane, v);
      KVFLEET_UNROLL
      for (int i = 0; i < 8; ++i) acc[i] = __fmaf_rn(e, v[i], acc[i]);
    }
    KVFLEET_UNROLL
    for (int i = 0; i < 8; ++i) combine[subset][dim_lane * 8 + i] = acc[i];
    __syncthreads();
    const int64_t t = item.first_token + r / group, h = kv_head * group + r % group;
    // A row whose position is before this partition has no partial here.
    if (p.where.positions[t] >= key_begin) {
      const int64_t row = (p.partial_offsets[t] + item.partition) * p.num_heads + h;
      for (int d = tid; d < D; d += kThreads) {
        float o = 0.0f;
        for (int s = 0; s < kSubsets; ++s) o = __fadd_rn(o, combine[s][d]);
        p.partial_o[row * D + d] = o;
      }
      if (tid == 0) {
        p.partial_ml[2 * row] = row_m[r];
        p.partial_ml[2 * row + 1] = row_l[r];
      }
    }
    __syncthreads();
  }
}

// One block per (token, head); thread d owns output dim d.
template <int D>
__global__ void CombineKernel(PagedAttentionParams p, int32_t first_token) {
  const int64_t t = first_token + static_cast<int64_t>(blockIdx.x), h = blockIdx.y;
  const int d = static_cast<int>(threadIdx.x);
  const int32_t parts = PartitionsFor(p.where.positions[t]);
  const int32_t first = FirstPartitionFor(p.where.positions[t], p.window);
  const int64_t base = p.partial_offsets[t];
  float m_all = -INFINITY;
  for (int32_t part = first; part < parts; ++part) {
    m_all = fmaxf(m_all, p.partial_ml[2 * ((base + part) * p.num_heads + h)]);
  }
  float l_all = 0.0f, acc = 0.0f;
  for (int32_t part = first; part < parts; ++part) {
    const int64_t row = (base + part) * p.num_heads + h;
    const float w = expf(__fsub_rn(p.partial_ml[2 * row], m_all));
    l_all = __fmaf_rn(w, p.partial_ml[2 * row + 1], l_all);
    if (d < D) acc = __fmaf_rn(w, p.partial_o[row * D + d], acc);
  }
  if (d < D) p.out[(t * p.num_heads + h) * D + d] = __fdiv_rn(acc, l_all);
}

template <int D>
void LaunchForDim(const PagedAttentionParams& p, const AttentionPlan& plan, ::kvfleet::cuda::Stream stream) {
  auto* partition = &PartitionKernel<D>;
  auto* combine = &CombineKernel<D>;
  const unsigned kv_heads = static_cast<unsigned>(p.layout.num_kv_heads);
  for (const AttentionGroup& g : plan.groups) {
    KVFLEET_LAUNCH(partition, dim3(static_cast<unsigned>(g.num_items), kv_heads), dim3(kThreads), 0, stream, p,
                   g.first_item);
    KVFLEET_LAUNCH(combine, dim3(static_cast<unsigned>(g.num_tokens), static_cast<unsigned>(p.num_heads)),
                   dim3(D < 32 ? 32 : D), 0, stream, p, g.first_token);
  }
}

// Eight values of one row into the cache, in the layout's dtype. A kInt8
// row's scale comes from the whole row's max |x|, which every thread of the
// row computes alike (max is exact in any order); chunk 0 stores it. A key
// row of kInt8Rotated is rotated first, by every thread of the row alike
// (the transform is one fixed order of additions: kv_format.h), after its
// channels are divided by `channel_scales` (int8_rotated_scaled; exact:
// powers of two).
__device__ __forceinline__ void StoreRow8(const KvCacheLayout& L, const float* source, bool rotate,
                                          const float* channel_scales, int64_t c, int64_t block, int64_t kv_head,
                                          int64_t slot, uint8_t* cache) {
  float rotated[kMaxRotatedHeadDim];
  const float* row = source;
  if (rotate) {
    for (int64_t i = 0; i < L.head_dim; ++i) {
      rotated[i] = channel_scales != nullptr ? __fdiv_rn(source[i], channel_scales[i]) : source[i];
    }
    HadamardBlocks(rotated, L.head_dim, KvRotationBlock(L.head_dim));
    row = rotated;
  }
  const float* x = row + c * 8;
  uint8_t* dst = cache + L.RowOffset(block, kv_head, slot) + c * 8 * KvElementBytes(L.dtype);
  switch (L.dtype) {
    case KvCacheDtype::kF16: {
      uint32_t w[4];
      KVFLEET_UNROLL
      for (int i = 0; i < 4; ++i) {
        w[i] = ::kvfleet::cuda::FloatToHalfBits(x[2 * i]) |
               (static_cast<uint32_t>(::kvfleet::cuda::FloatToHalfBits(x[2 * i + 1])) << 16);
      }
      *reinterpret_cast<uint4*>(dst) = uint4{w[0], w[1], w[2], w[3]};
      return;
    }
    case KvCacheDtype::kInt8:
    case KvCacheDtype::kInt8Rotated:
    case KvCacheDtype::kInt8RotatedScaled: {
      float max_abs = 0.0f;
      for (int64_t i = 0; i < L.head_dim; ++i) max_abs = fmaxf(max_abs, fabsf(row[i]));
      const uint16_t scale_bits = ::kvfleet::cuda::FloatToHalfBits(__fdiv_rn(max_abs, static_cast<float>(kInt8KvMax)));
      if (c == 0) *reinterpret_cast<uint16_t*>(cache + L.ScaleOffset(block, kv_head, slot)) = scale_bits;
      const float scale = ::kvfleet::cuda::HalfBitsToFloat(scale_bits);
      uint32_t w[2] = {0, 0};
      KVFLEET_UNROLL
      for (int i = 0; i < 8; ++i) {
        w[i / 4] |= static_cast<uint32_t>(static_cast<uint8_t>(QuantizeInt8(x[i], scale))) << (8 * (i % 4));
      }
      *reinterpret_cast<uint2*>(dst) = uint2{w[0], w[1]};
      return;
    }
    case KvCacheDtype::kFp8E4M3: {
      uint32_t w[2] = {0, 0};
      KVFLEET_UNROLL
      for (int i = 0; i < 8; ++i) w[i / 4] |= static_cast<uint32_t>(FloatToFp8E4M3(x[i])) << (8 * (i % 4));
      *reinterpret_cast<uint2*>(dst) = uint2{w[0], w[1]};
      return;
    }
  }
}

__global__ void WriteKvKernel(KvCacheLayout layout, TokenPlacement where, const float* k, const float* v,
                              int64_t chunks_per_token, uint8_t* k_cache, uint8_t* v_cache, const float* key_scales,
                              int64_t total) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  // idx = (token, kv_head, chunk of 8 dims)
  const int64_t t = idx / chunks_per_token, rest = idx % chunks_per_token;
  const int64_t h = rest / (layout.head_dim / 8), c = rest % (layout.head_dim / 8);
  const int64_t slot = where.kv_slots[t];
  const int64_t src = (t * layout.num_kv_heads + h) * layout.head_dim;
  const float* channel_scales = KvScalesKeyChannels(layout.dtype) ? key_scales + h * layout.head_dim : nullptr;
  StoreRow8(layout, k + src, KvRotatesKeys(layout.dtype), channel_scales, c, slot / layout.block_size, h,
            slot % layout.block_size, k_cache);
  StoreRow8(layout, v + src, false, nullptr, c, slot / layout.block_size, h, slot % layout.block_size, v_cache);
}

// One thread per (KV head, 4-byte word of a row, or the row's scale), over
// every move in order: a given byte is only ever touched by one thread, so
// the moves' order holds without any synchronisation.
__global__ void MoveKvRowsKernel(KvCacheLayout layout, const int64_t* moves, int32_t count, uint8_t* cache) {
  const int64_t words = layout.RowBytes() / 4;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= layout.num_kv_heads * (words + 1)) return;
  const int64_t h = idx / (words + 1), w = idx % (words + 1);
  const int64_t bs = layout.block_size;
  for (int32_t m = 0; m < count; ++m) {
    const int64_t from = moves[2 * m], to = moves[2 * m + 1];
    if (w < words) {
      *reinterpret_cast<uint32_t*>(cache + layout.RowOffset(to / bs, h, to % bs) + 4 * w) =
          *reinterpret_cast<const uint32_t*>(cache + layout.RowOffset(from / bs, h, from % bs) + 4 * w);
    } else if (KvRowScaleBytes(layout.dtype) > 0) {
      *reinterpret_cast<uint16_t*>(cache + layout.ScaleOffset(to / bs, h, to % bs)) =
          *reinterpret_cast<const uint16_t*>(cache + layout.ScaleOffset(from / bs, h, from % bs));
    }
  }
}

}  // namespace

void LaunchMoveKvRows(const KvCacheLayout& layout, const int64_t* moves, int32_t count, uint8_t* cache,
                      ::kvfleet::cuda::Stream stream) {
  const int64_t total = layout.num_kv_heads * (layout.RowBytes() / 4 + 1);
  if (count == 0 || total == 0) return;
  auto* kernel = &MoveKvRowsKernel;
  KVFLEET_LAUNCH(kernel, dim3(static_cast<unsigned>((total + 127) / 128)), dim3(128), 0, stream, layout, moves, count,
                 cache);
}

bool PagedAttentionSupports(int64_t head_dim, int64_t num_heads, int64_t num_kv_heads, std::string* why) {
  if (head_dim != 16 && head_dim != 32 && head_dim != 64 && head_dim != 128 && head_dim != 256) {
    if (why != nullptr) *why = "the CUDA attention kernels take head dimensions 16, 32, 64, 128 and 256";
    return false;
  }
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0 || num_heads / num_kv_heads > kMaxTileRows) {
    if (why != nullptr) *why = "the CUDA attention kernels take at most 16 query heads per KV head";
    return false;
  }
  return true;
}

void LaunchWriteKv(const KvCacheLayout& layout, const TokenPlacement& where, const float* k, const float* v,
                   int64_t tokens, uint8_t* k_cache, uint8_t* v_cache, const float* key_scales,
                   ::kvfleet::cuda::Stream stream) {
  const int64_t chunks_per_token = layout.num_kv_heads * (layout.head_dim / 8);
  const int64_t total = tokens * chunks_per_token;
  if (total == 0) return;
  auto* kernel = &WriteKvKernel;
  KVFLEET_LAUNCH(kernel, dim3(static_cast<unsigned>((total + 127) / 128)), dim3(128), 0, stream, layout, where, k, v,
                 chunks_per_token, k_cache, v_cache, key_scales, total);
}

void LaunchPagedAttention(const PagedAttentionParams& p, const AttentionPlan& plan, ::kvfleet::cuda::Stream stream) {
  switch (p.layout.head_dim) {
    case 16: return LaunchForDim<16>(p, plan, stream);
    case 32: return LaunchForDim<32>(p, plan, stream);
    case 64: return LaunchForDim<64>(p, plan, stream);
    case 128: return LaunchForDim<128>(p, plan, stream);
    case 256: return LaunchForDim<256>(p, plan, stream);
  }
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
