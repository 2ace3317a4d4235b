#include "kernels/cpu/q8_panels.h"

#include <cstring>

#include "common/check.h"
#include "kernels/cpu/quant_blocks.h"

namespace kvfleet::kernels {
namespace {

// The unsigned nibble of element e (0..31) of a Q4 block's qs.
inline uint8_t Nibble(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 0x0F : qs[e - 16] >> 4; }

}  // namespace

int64_t Q8PanelBlockBytes(DType type) {
  switch (type) {
    case DType::kQ8_0: return kQ8PanelRows * sizeof(BlockQ8_0);
    case DType::kQ4_0: return kQ8PanelRows * sizeof(BlockQ4_0);
    case DType::kQ4_1: return kQ8PanelRows * sizeof(BlockQ4_1);
    default: CHECK(false) << "no 8-bit activation panels for " << DTypeName(type); return 0;
  }
}

int64_t Q8PanelBytes(DType type, int64_t n, int64_t k) {
  return (n + kQ8PanelRows - 1) / kQ8PanelRows * (k / 32) * Q8PanelBlockBytes(type);
}

void PackQ8Panels(DType type, const void* rows, int64_t n, int64_t k, uint8_t* out) {
  CHECK(k % 32 == 0) << "panel rows of " << k << " columns: not a multiple of 32";
  const int64_t blocks = k / 32, panels = (n + kQ8PanelRows - 1) / kQ8PanelRows;
  const int64_t block_bytes = Q8PanelBlockBytes(type);
  const int64_t row_bytes = blocks * block_bytes / kQ8PanelRows;
  const auto* src = static_cast<const uint8_t*>(rows);
  std::memset(out, 0, static_cast<size_t>(panels * blocks * block_bytes));
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* dst = out + (p * blocks + b) * block_bytes;
      const int64_t qs_bytes = type == DType::kQ8_0 ? 256 : 128;
      auto* d = reinterpret_cast<uint16_t*>(dst + qs_bytes);
      for (int64_t r = 0; r < kQ8PanelRows && p * kQ8PanelRows + r < n; ++r) {
        const uint8_t* block = src + (p * kQ8PanelRows + r) * row_bytes + b * (block_bytes / kQ8PanelRows);
        if (type == DType::kQ8_0) {
          const auto& q = *reinterpret_cast<const BlockQ8_0*>(block);
          for (int g = 0; g < 8; ++g) std::memcpy(dst + 32 * g + 4 * r, q.qs + 4 * g, 4);
          d[r] = q.d;
          continue;
        }
        const uint8_t* qs;
        if (type == DType::kQ4_0) {
          const auto& q = *reinterpret_cast<const BlockQ4_0*>(block);
          qs = q.qs;
          d[r] = q.d;
        } else {
          const auto& q = *reinterpret_cast<const BlockQ4_1*>(block);
          qs = q.qs;
          d[r] = q.d;
          d[kQ8PanelRows + r] = q.m;  // m[8] follows d[8]
        }
        for (int c = 0; c < 4; ++c) {
          for (int i = 0; i < 4; ++i) {
            dst[32 * c + 4 * r + i] = static_cast<uint8_t>(Nibble(qs, 8 * c + i) | Nibble(qs, 8 * c + 4 + i) << 4);
          }
        }
      }
    }
  }
}

}  // namespace kvfleet::kernels
