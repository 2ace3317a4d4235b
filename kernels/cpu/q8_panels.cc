#include "kernels/cpu/q8_panels.h"

#include <cstring>

#include "common/check.h"
#include "kernels/cpu/formats/all_formats.h"

namespace kvfleet::kernels {
namespace {

int64_t SuperBytes(const Q8PanelLayout& l) { return l.header_bytes + 8 * l.block_bytes; }

}  // namespace

Q8PanelLayout PanelLayout(DType t) {
  return DispatchDType(t, [](auto c) { return kQ8Panels<decltype(c)::value>; });
}

Q8SourceBlock UnpackQ8SourceBlock(DType type, const uint8_t* row, int64_t b) {
  return DispatchDType(type, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    if constexpr (kHasQ8Panels<T>) {
      return CpuFormat<T>::Unpack(row, b);
    } else {
      CHECK(false) << "no 8-bit activation panels for " << DTypeName(type);
      return Q8SourceBlock{};
    }
  });
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
            scales[8 * h + r] =
                l.scales == Q8Scales::kPacked4 ? static_cast<uint8_t>(s.scale[h] | s.min[h] << 4) : s.scale[h];
          }
        }
      }
    }
  }
}

}  // namespace kvfleet::kernels
