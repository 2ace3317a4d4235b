// The op harness's float64 references: the plain definition of every op,
// with the storage types' own rounding where the backends must reproduce it
// (weights dequantized by kernels::DequantizeRow, the reference semantics of
// each format; K/V rounded to float16 as the cache stores them).
#pragma once

#include <cstdint>
#include <vector>

#include "tests/unit/engine/executor/ops/op_backend.h"

namespace kvfleet::engine::ops_test {

std::vector<double> RefEmbed(const HostWeights& table, const std::vector<int32_t>& ids);
std::vector<double> RefMatMul(const HostWeights& w, const std::vector<float>& x, int64_t m);
// x · W'ᵀ with each segment's adapter merged into W for its rows:
// W' = W + scale · B·A, all in float64.
std::vector<double> RefMergedLoraMatMul(const HostWeights& w, const std::vector<float>& x, int64_t m,
                                        const std::vector<HostLoraSegment>& segments);
std::vector<double> RefRmsNorm(const std::vector<float>& x, const std::vector<float>& weight, int64_t rows, float eps);
std::vector<double> RefRope(const kernels::RopeParams& p, const std::vector<float>& x,
                            const std::vector<int32_t>& positions, int64_t heads);
std::vector<double> RefSwiGlu(const std::vector<float>& gate, const std::vector<float>& up);
std::vector<double> RefSilu(const std::vector<float>& x);
std::vector<double> RefGeluTanhMul(const std::vector<float>& gate, const std::vector<float>& up);
std::vector<double> RefAddBias(const std::vector<float>& y, const std::vector<float>& bias, int64_t rows);
std::vector<double> RefScale(const std::vector<float>& x, float s);
std::vector<double> RefAdd(const std::vector<float>& y, const std::vector<float>& x);
// The cache after the batch's K/V are written (in the layout's dtype,
// exact: backends must match it bit for bit), and attention over it
// (within c.window), reading each cached value as kv_format.h decodes it.
double RefKvValue(const kernels::KvCacheLayout& L, const std::vector<uint8_t>& cache, int64_t block, int64_t h,
                  int64_t slot, int64_t i);
void RefWriteKv(const AttentionCase& c, std::vector<uint8_t>& k_cache, std::vector<uint8_t>& v_cache);
std::vector<double> RefAttention(const AttentionCase& c);
std::vector<double> RefLogits(const std::vector<float>& x, const std::vector<int32_t>& rows,
                              const std::vector<float>& norm_weight, const HostWeights& head, float eps);

// Σ(out − ref)² / Σ ref² (normalised mean squared error, as llama.cpp's
// test-backend-ops measures); +inf when out has a NaN or the sizes differ.
double Nmse(const std::vector<float>& out, const std::vector<double>& ref);

// Helpers to build cases.
HostWeights RandomWeights(DType dtype, int64_t rows, int64_t cols, uint32_t seed, float scale = 1.0f);
std::vector<float> DequantizedRows(const HostWeights& w);

}  // namespace kvfleet::engine::ops_test
