#include "tests/unit/engine/executor/ops/op_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/check.h"
#include "common/float16.h"
#include "kernels/cpu/quantize.h"
#include "tests/testing/random_data.h"

namespace kvfleet::engine::ops_test {

std::vector<float> DequantizedRows(const HostWeights& w) {
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  const int64_t row_bytes = RowBytes(w.dtype, w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    kernels::DequantizeRow(w.dtype, w.bytes.data() + r * row_bytes, out.data() + r * w.cols, w.cols);
  }
  return out;
}

HostWeights RandomWeights(DType dtype, int64_t rows, int64_t cols, uint32_t seed, float scale) {
  const std::vector<float> values = testing::RandomFloats(rows * cols, seed, scale);
  HostWeights w{.dtype = dtype, .rows = rows, .cols = cols};
  const int64_t row_bytes = RowBytes(dtype, cols);
  w.bytes.resize(static_cast<size_t>(rows * row_bytes));
  for (int64_t r = 0; r < rows; ++r) {
    kernels::QuantizeRow(dtype, values.data() + r * cols, w.bytes.data() + r * row_bytes, cols);
  }
  return w;
}

std::vector<double> RefEmbed(const HostWeights& table, const std::vector<int32_t>& ids) {
  const std::vector<float> rows = DequantizedRows(table);
  std::vector<double> out;
  for (int32_t id : ids) out.insert(out.end(), rows.begin() + id * table.cols, rows.begin() + (id + 1) * table.cols);
  return out;
}

std::vector<double> RefMatMul(const HostWeights& w, const std::vector<float>& x, int64_t m) {
  const std::vector<float> wd = DequantizedRows(w);
  std::vector<double> y(static_cast<size_t>(m * w.rows));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < w.rows; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < w.cols; ++k) acc += static_cast<double>(wd[j * w.cols + k]) * x[i * w.cols + k];
      y[i * w.rows + j] = acc;
    }
  }
  return y;
}

std::vector<double> RefMergedLoraMatMul(const HostWeights& w, const std::vector<float>& x, int64_t m,
                                        const std::vector<HostLoraSegment>& segments) {
  const std::vector<float> wd = DequantizedRows(w);
  std::vector<double> y(static_cast<size_t>(m * w.rows));
  for (int64_t i = 0; i < m; ++i) {
    const HostLoraSegment* seg = nullptr;
    for (const HostLoraSegment& s : segments) {
      if (!s.a.empty() && i >= s.first_row && i < s.first_row + s.rows) seg = &s;
    }
    for (int64_t j = 0; j < w.rows; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < w.cols; ++k) {
        double merged = wd[j * w.cols + k];
        if (seg != nullptr) {
          double ba = 0;
          for (int32_t r = 0; r < seg->rank; ++r) {
            ba += static_cast<double>(seg->b[j * seg->rank + r]) * seg->a[r * w.cols + k];
          }
          merged += static_cast<double>(seg->scale) * ba;
        }
        acc += merged * x[i * w.cols + k];
      }
      y[i * w.rows + j] = acc;
    }
  }
  return y;
}

std::vector<double> RefRmsNorm(const std::vector<float>& x, const std::vector<float>& weight, int64_t rows, float eps) {
  const int64_t n = static_cast<int64_t>(weight.size());
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum_sq = 0;
    for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const double scale = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * scale * weight[i];
  }
  return y;
}

std::vector<double> RefRope(const kernels::RopeParams& p, const std::vector<float>& x,
                            const std::vector<int32_t>& positions, int64_t heads) {
  std::vector<double> y(x.begin(), x.end());
  const int64_t half = p.rot_dim / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      double* v = y.data() + (static_cast<int64_t>(t) * heads + h) * p.head_dim;
      for (int64_t i = 0; i < half; ++i) {
        double inv_freq = std::pow(static_cast<double>(p.theta_base), -2.0 * static_cast<double>(i) / p.rot_dim);
        if (p.freq_factors != nullptr) inv_freq /= p.freq_factors[i];
        const double angle = positions[t] * static_cast<double>(p.position_scale) * inv_freq;
        const int64_t a = p.mode == kernels::RopeMode::kAdjacent ? 2 * i : i;
        const int64_t b = p.mode == kernels::RopeMode::kAdjacent ? 2 * i + 1 : i + half;
        const double x0 = v[a], x1 = v[b];
        const double c = std::cos(angle) * p.magnitude, s = std::sin(angle) * p.magnitude;
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
  return y;
}

std::vector<double> RefSilu(const std::vector<float>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] / (1.0 + std::exp(-static_cast<double>(x[i])));
  return out;
}

std::vector<double> RefSwiGlu(const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<double> out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    out[i] = g / (1.0 + std::exp(-g)) * up[i];
  }
  return out;
}

std::vector<double> RefGeluTanhMul(const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<double> out(gate.size());
  const double k = std::sqrt(2.0 / std::acos(-1.0));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    out[i] = 0.5 * g * (1.0 + std::tanh(k * (g + 0.044715 * g * g * g))) * up[i];
  }
  return out;
}

std::vector<double> RefAddBias(const std::vector<float>& y, const std::vector<float>& bias, int64_t rows) {
  const int64_t n = static_cast<int64_t>(bias.size());
  std::vector<double> out(y.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = static_cast<double>(y[r * n + i]) + bias[i];
  }
  return out;
}

std::vector<double> RefScale(const std::vector<float>& x, float s) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]) * s;
  return out;
}

std::vector<double> RefAdd(const std::vector<float>& y, const std::vector<float>& x) {
  std::vector<double> out(y.size());
  for (size_t i = 0; i < y.size(); ++i) out[i] = static_cast<double>(y[i]) + x[i];
  return out;
}

namespace {

// One row into the cache as kv_format.h defines it, written out here
// independently of either backend.
// A key row of kInt8Rotated is rotated first (`rotate`), with the format's
// own transform: its float32 additions in their fixed order are part of the
// format, as the FP8 codec is.
// Its channels are divided by `channel_scales` first when given
// (int8_rotated_scaled: powers of two, exact).
void RefStoreRow(const kernels::KvCacheLayout& L, const float* source, bool rotate, const float* channel_scales,
                 int64_t block, int64_t h, int64_t slot, std::vector<uint8_t>& cache) {
  std::vector<float> rotated(source, source + L.head_dim);
  if (channel_scales != nullptr) {
    for (int64_t i = 0; i < L.head_dim; ++i) rotated[i] /= channel_scales[i];
  }
  if (rotate) kernels::HadamardBlocks(rotated.data(), L.head_dim, kernels::KvRotationBlock(L.head_dim));
  const float* x = rotated.data();
  uint8_t* row = cache.data() + L.RowOffset(block, h, slot);
  if (L.dtype == kernels::KvCacheDtype::kF16) {
    for (int64_t i = 0; i < L.head_dim; ++i) {
      const uint16_t bits = ::kvfleet::FloatToHalf(x[i]);
      std::memcpy(row + 2 * i, &bits, 2);
    }
  } else if (kernels::KvRowScaleBytes(L.dtype) > 0) {
    float max_abs = 0.0f;
    for (int64_t i = 0; i < L.head_dim; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
    const uint16_t scale_bits = ::kvfleet::FloatToHalf(max_abs / 127.0f);
    std::memcpy(cache.data() + L.ScaleOffset(block, h, slot), &scale_bits, 2);
    const float scale = ::kvfleet::HalfToFloat(scale_bits);
    for (int64_t i = 0; i < L.head_dim; ++i) {
      const double q = scale == 0.0f ? 0.0 : std::nearbyint(static_cast<double>(x[i] / scale));  // half to even
      row[i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0, 127.0)));
    }
  } else {
    for (int64_t i = 0; i < L.head_dim; ++i) row[i] = kernels::FloatToFp8E4M3(x[i]);
  }
}

}  // namespace

double RefKvValue(const kernels::KvCacheLayout& L, const std::vector<uint8_t>& cache, int64_t block, int64_t h,
                  int64_t slot, int64_t i) {
  const uint8_t* row = cache.data() + L.RowOffset(block, h, slot);
  switch (L.dtype) {
    case kernels::KvCacheDtype::kF16: {
      uint16_t bits;
      std::memcpy(&bits, row + 2 * i, 2);
      return ::kvfleet::HalfToFloat(bits);
    }
    case kernels::KvCacheDtype::kInt8:
    case kernels::KvCacheDtype::kInt8Rotated:
    case kernels::KvCacheDtype::kInt8RotatedScaled: {
      uint16_t scale;
      std::memcpy(&scale, cache.data() + L.ScaleOffset(block, h, slot), 2);
      return static_cast<double>(static_cast<int8_t>(row[i])) * ::kvfleet::HalfToFloat(scale);
    }
    case kernels::KvCacheDtype::kFp8E4M3:
      return kernels::Fp8E4M3ToFloat(row[i]);
  }
  return 0;
}

void RefWriteKv(const AttentionCase& c, std::vector<uint8_t>& k_cache, std::vector<uint8_t>& v_cache) {
  k_cache = c.k_cache;
  v_cache = c.v_cache;
  const kernels::KvCacheLayout& L = c.layout;
  for (int32_t t = 0; t < c.batch->num_tokens(); ++t) {
    const int64_t slot = c.batch->kv_slots[t];
    for (int64_t h = 0; h < L.num_kv_heads; ++h) {
      const int64_t src = (t * L.num_kv_heads + h) * L.head_dim;
      const float* channel_scales =
          kernels::KvScalesKeyChannels(L.dtype) ? c.key_scales.data() + h * L.head_dim : nullptr;
      RefStoreRow(L, c.k.data() + src, kernels::KvRotatesKeys(L.dtype), channel_scales, slot / L.block_size, h,
                  slot % L.block_size, k_cache);
      RefStoreRow(L, c.v.data() + src, false, nullptr, slot / L.block_size, h, slot % L.block_size, v_cache);
    }
  }
}

std::vector<double> RefAttention(const AttentionCase& c) {
  std::vector<uint8_t> kc, vc;
  RefWriteKv(c, kc, vc);
  const kernels::KvCacheLayout& L = c.layout;
  const ForwardBatch& b = *c.batch;
  const int64_t d = L.head_dim, group = c.num_heads / L.num_kv_heads;
  std::vector<double> out(static_cast<size_t>(b.num_tokens() * c.num_heads * d));
  for (int32_t t = 0; t < b.num_tokens(); ++t) {
    const std::span<const int32_t> table = b.BlockTableRow(b.token_chunk[t]);
    const int64_t context = b.positions[t] + 1;
    // The window rule: key k is visible to query q iff q − k < window.
    const int64_t first = c.window > 0 ? std::max<int64_t>(0, context - c.window) : 0;
    for (int64_t h = 0; h < c.num_heads; ++h) {
      const int64_t g = h / group;
      // Stored keys rotated: the query rotated in float64 (its channels
      // scaled as its KV head's keys were, inversely), the scores over n.
      std::vector<double> q(c.q.data() + (t * c.num_heads + h) * d, c.q.data() + (t * c.num_heads + h + 1) * d);
      if (kernels::KvScalesKeyChannels(L.dtype)) {
        for (int64_t i = 0; i < d; ++i) q[i] *= c.key_scales[g * d + i];
      }
      const bool rotated = kernels::KvRotatesKeys(L.dtype);
      if (rotated) kernels::HadamardBlocks(q.data(), d, kernels::KvRotationBlock(d));
      const double scale = rotated ? c.scale / static_cast<double>(kernels::KvRotationBlock(d)) : c.scale;
      std::vector<double> s(static_cast<size_t>(context), -std::numeric_limits<double>::infinity());
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = first; j < context; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) {
          dot += q[i] * RefKvValue(L, kc, table[j / L.block_size], g, j % L.block_size, i);
        }
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t i = 0; i < d; ++i) {
        double acc = 0;
        for (int64_t j = first; j < context; ++j) {
          acc += s[j] * RefKvValue(L, vc, table[j / L.block_size], g, j % L.block_size, i);
        }
        out[(t * c.num_heads + h) * d + i] = acc / sum;
      }
    }
  }
  return out;
}

std::vector<double> RefLogits(const std::vector<float>& x, const std::vector<int32_t>& rows,
                              const std::vector<float>& norm_weight, const HostWeights& head, float eps) {
  const int64_t n = head.cols;
  std::vector<float> gathered;
  for (int32_t r : rows) gathered.insert(gathered.end(), x.begin() + r * n, x.begin() + (r + 1) * n);
  const std::vector<double> normed = RefRmsNorm(gathered, norm_weight, static_cast<int64_t>(rows.size()), eps);
  // The head sees the normed rows at float precision, as every backend does.
  const std::vector<float> normed_f(normed.begin(), normed.end());
  return RefMatMul(head, normed_f, static_cast<int64_t>(rows.size()));
}

double Nmse(const std::vector<float>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i])) return std::numeric_limits<double>::infinity();
    err += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? err / norm : err;
}

}  // namespace kvfleet::engine::ops_test
