#include "kernels/cpu/q8_panels.h"

#include <cstring>

#include "common/check.h"
#include "kernels/cpu/quant_blocks.h"

namespace kvfleet::kernels {
namespace {

// The unsigned nibble of element e (0..31) of a 32-value block's qs.
inline uint8_t Nibble(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 0x0F : qs[e - 16] >> 4; }

// The fifth bits of Q5_0 and Q5_1: bit e of a little-endian word.
inline uint8_t FifthBit(const uint8_t* qh, int e) { return (qh[e / 8] >> (e % 8)) & 1; }

template <class Block>
const Block& BlockAt(const uint8_t* row, int64_t b) {
  return reinterpret_cast<const Block*>(row)[b];
}

int64_t SuperBytes(const Q8PanelLayout& l) { return l.header_bytes + 8 * l.block_bytes; }

}  // namespace

Q8SourceBlock UnpackQ8SourceBlock(DType type, const uint8_t* row, int64_t b) {
  Q8SourceBlock s;
  const int j = static_cast<int>(b % 8);  // a K-quant's sub-block
  switch (type) {
    case DType::kQ8_0: {
      const auto& q = BlockAt<BlockQ8_0>(row, b);
      std::memcpy(s.u, q.qs, 32);
      s.d = q.d;
      break;
    }
    case DType::kQ4_0: {
      const auto& q = BlockAt<BlockQ4_0>(row, b);
      for (int e = 0; e < 32; ++e) s.u[e] = Nibble(q.qs, e);
      s.d = q.d;
      break;
    }
    case DType::kQ4_1: {
      const auto& q = BlockAt<BlockQ4_1>(row, b);
      for (int e = 0; e < 32; ++e) s.u[e] = Nibble(q.qs, e);
      s.d = q.d;
      s.dmin = q.m;
      break;
    }
    case DType::kQ5_0: {
      const auto& q = BlockAt<BlockQ5_0>(row, b);
      for (int e = 0; e < 32; ++e) s.u[e] = static_cast<uint8_t>(Nibble(q.qs, e) | FifthBit(q.qh, e) << 4);
      s.d = q.d;
      break;
    }
    case DType::kQ5_1: {
      const auto& q = BlockAt<BlockQ5_1>(row, b);
      for (int e = 0; e < 32; ++e) s.u[e] = static_cast<uint8_t>(Nibble(q.qs, e) | FifthBit(q.qh, e) << 4);
      s.d = q.d;
      s.dmin = q.m;
      break;
    }
    case DType::kQ2_K: {
      const auto& q = BlockAt<BlockQ2_K>(row, b / 8);
      for (int l = 0; l < 32; ++l) s.u[l] = (q.qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3;
      s.d = q.d;
      s.dmin = q.dmin;
      for (int h = 0; h < 2; ++h) {
        s.scale[h] = q.scales[2 * j + h] & 0x0F;
        s.min[h] = q.scales[2 * j + h] >> 4;
      }
      break;
    }
    case DType::kQ3_K: {
      const auto& q = BlockAt<BlockQ3_K>(row, b / 8);
      for (int l = 0; l < 32; ++l) {
        s.u[l] = static_cast<uint8_t>(((q.qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3) | ((q.hmask[l] >> j) & 1) << 2);
      }
      s.d = q.d;
      for (int h = 0; h < 2; ++h) s.scale[h] = static_cast<uint8_t>(static_cast<int8_t>(Q3KScale(q.scales, 2 * j + h)));
      break;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const uint8_t* super = row + (b / 8) * Traits(type).block_bytes;
      const auto& q4 = *reinterpret_cast<const BlockQ4_K*>(super);  // d, dmin, scales: the same bytes in both
      const uint8_t* qs = type == DType::kQ4_K ? q4.qs : reinterpret_cast<const BlockQ5_K*>(super)->qs;
      for (int l = 0; l < 32; ++l) s.u[l] = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0F;
      if (type == DType::kQ5_K) {
        const uint8_t* qh = reinterpret_cast<const BlockQ5_K*>(super)->qh;
        for (int l = 0; l < 32; ++l) s.u[l] = static_cast<uint8_t>(s.u[l] | ((qh[l] >> j) & 1) << 4);
      }
      s.d = q4.d;
      s.dmin = q4.dmin;
      Q4KScaleMin(q4.scales, j, &s.scale[0], &s.min[0]);
      s.scale[1] = s.scale[0];
      s.min[1] = s.min[0];
      break;
    }
    case DType::kQ6_K: {
      const auto& q = BlockAt<BlockQ6_K>(row, b / 8);
      for (int l = 0; l < 32; ++l) {
        const int e = 32 * j + l, half = e / 128, r = e % 128;
        const int low = (q.ql[64 * half + r % 64] >> (4 * (r / 64))) & 0x0F;
        const int high = (q.qh[32 * half + r % 32] >> (2 * (r / 32))) & 3;
        s.u[l] = static_cast<uint8_t>(low | high << 4);
      }
      s.d = q.d;
      for (int h = 0; h < 2; ++h) s.scale[h] = static_cast<uint8_t>(q.scales[2 * j + h]);
      break;
    }
    default: CHECK(false) << "no 8-bit activation panels for " << DTypeName(type);
  }
  return s;
}

int64_t Q8PanelBytes(DType type, int64_t n, int64_t k) {
  const Q8PanelLayout l = PanelLayout(type);
  CHECK(l.low_bits != 0) << "no 8-bit activation panels for " << DTypeName(type);
  const int64_t panels = (n + kQ8PanelRows - 1) / kQ8PanelRows;
  return l.super ? panels * (k / 256) * SuperBytes(l) : panels * (k / 32) * l.block_bytes;
}

void PackQ8Panels(DType type, const void* rows, int64_t n, int64_t k, uint8_t* out) {
  const Q8PanelLayout l = PanelLayout(type);
  CHECK(k % Traits(type).block_elems == 0 && k % 32 == 0)
      << "panel rows of " << k << " columns: not whole blocks of " << DTypeName(type);
  const int64_t blocks = k / 32, panels = (n + kQ8PanelRows - 1) / kQ8PanelRows;
  const int64_t row_bytes = RowBytes(type, k);
  const auto* src = static_cast<const uint8_t*>(rows);
  std::memset(out, 0, static_cast<size_t>(Q8PanelBytes(type, n, k)));
  for (int64_t p = 0; p < panels; ++p) {
    uint8_t* panel = out + p * (l.super ? (k / 256) * SuperBytes(l) : blocks * l.block_bytes);
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* header = l.super ? panel + (b / 8) * SuperBytes(l) : nullptr;
      uint8_t* dst = l.super ? header + l.header_bytes + (b % 8) * l.block_bytes : panel + b * l.block_bytes;
      uint8_t* low = dst;
      uint8_t* high = dst + 32 * l.low_bits;
      uint8_t* scales = high + 32 * l.high_bits;
      for (int64_t r = 0; r < kQ8PanelRows && p * kQ8PanelRows + r < n; ++r) {
        const Q8SourceBlock s = UnpackQ8SourceBlock(type, src + (p * kQ8PanelRows + r) * row_bytes, b);
        for (int e = 0; e < 32; ++e) {
          const int q = e / 4, byte = static_cast<int>(4 * r + e % 4);
          const uint8_t u = s.u[e];
          switch (l.low_bits) {
            case 8: low[32 * q + byte] = u; break;
            case 4: low[32 * (q / 2) + byte] |= static_cast<uint8_t>((u & 0x0F) << (4 * (q % 2))); break;
            default: low[32 * (q / 4) + byte] |= static_cast<uint8_t>((u & 3) << (2 * (q % 4))); break;
          }
          const int above = u >> l.low_bits;
          if (l.high_bits == 1) high[byte] |= static_cast<uint8_t>(above << q);
          if (l.high_bits == 2) high[32 * (q / 4) + byte] |= static_cast<uint8_t>(above << (2 * (q % 4)));
        }
        if (!l.super) {
          std::memcpy(scales + 2 * r, &s.d, 2);
          if (l.has_min) std::memcpy(scales + 16 + 2 * r, &s.dmin, 2);
          continue;
        }
        std::memcpy(header + 2 * r, &s.d, 2);
        if (l.has_min) std::memcpy(header + 16 + 2 * r, &s.dmin, 2);
        if (l.halves == 1) {
          scales[r] = s.scale[0];
          scales[8 + r] = s.min[0];
        } else {
          for (int h = 0; h < 2; ++h) {
            scales[8 * h + r] = type == DType::kQ2_K ? static_cast<uint8_t>(s.scale[h] | s.min[h] << 4) : s.scale[h];
          }
        }
      }
    }
  }
}

}  // namespace kvfleet::kernels
