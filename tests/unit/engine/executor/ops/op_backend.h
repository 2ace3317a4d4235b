// One backend's ops (model/arch/op_set.h's op set) behind host inputs and
// outputs, so the op harness can run the same cases through every backend
// and compare each with a float64 reference and with itself.
//
// Each backend's adapter moves the inputs into its memory (a copy to the
// device for CUDA), runs its own Ops class there and brings the outputs
// back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "engine/executor/forward_batch.h"
#include "kernels/common/paged_kv.h"
#include "kernels/common/rope_tables.h"

namespace kvfleet::engine::ops_test {

// A weight matrix [rows, cols] in its storage type.
struct HostWeights {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> bytes;
};

// One attention case: the batch's K/V are written into the cache, then every
// token of the batch attends over it.
struct AttentionCase {
  kernels::KvCacheLayout layout;
  int64_t num_heads = 0;
  float scale = 1.0f;
  int64_t window = 0;
  const ForwardBatch* batch = nullptr;
  std::vector<float> q;  // [tokens, heads, head_dim]
  std::vector<float> k;  // [tokens, kv_heads, head_dim]
  std::vector<float> v;
  // In: the cache before the batch (prefix K/V written by earlier steps); out: after.
  std::vector<uint8_t> k_cache, v_cache;  // bytes in `layout`
  // int8_rotated_scaled: [kv_heads, head_dim] powers of two; empty otherwise.
  std::vector<float> key_scales;
};

// One run of rows under a LoRA adapter: A [rank, in], B [out, rank];
// empty pairs when the adapter leaves the projection alone.
struct HostLoraSegment {
  int32_t first_row = 0;
  int32_t rows = 0;
  int32_t rank = 0;
  float scale = 1.0f;
  std::vector<float> a, b;
};

class OpBackend {
 public:
  virtual ~OpBackend() = default;

  // table holds the vocabulary's rows [first_row, first_row + table.rows).
  virtual std::vector<float> Embed(const HostWeights& table, const std::vector<int32_t>& ids,
                                   int64_t first_row = 0) = 0;
  virtual std::vector<float> MatMul(const HostWeights& w, const std::vector<float>& x, int64_t m) = 0;
  // MatMul, then AddLora of the segments' adapters (one projection's site).
  virtual std::vector<float> MatMulWithLora(const HostWeights& w, const std::vector<float>& x, int64_t m,
                                            const std::vector<HostLoraSegment>& segments) = 0;
  virtual std::vector<float> RmsNorm(const std::vector<float>& x, const std::vector<float>& weight, int64_t rows,
                                     float eps) = 0;
  virtual std::vector<float> Rope(const kernels::RopeParams& p, const std::vector<float>& x,
                                  const std::vector<int32_t>& positions, int64_t heads) = 0;
  virtual std::vector<float> AddBias(const std::vector<float>& y, const std::vector<float>& bias, int64_t rows) = 0;
  virtual std::vector<float> Scale(const std::vector<float>& x, float s) = 0;
  virtual std::vector<float> SwiGlu(const std::vector<float>& gate, const std::vector<float>& up) = 0;
  virtual std::vector<float> GeluTanhMul(const std::vector<float>& gate, const std::vector<float>& up) = 0;
  // silu(x), computed in place (as the draft heads use it).
  virtual std::vector<float> Silu(const std::vector<float>& x) = 0;
  virtual std::vector<float> Add(const std::vector<float>& y, const std::vector<float>& x) = 0;
  // WriteKv then Attention, over one layer's cache.
  virtual std::vector<float> Attention(AttentionCase& c) = 0;
  virtual std::vector<float> Logits(const std::vector<float>& x, const std::vector<int32_t>& rows,
                                    const std::vector<float>& norm_weight, const HostWeights& head, float eps) = 0;

  // The collectives over ranks.size() ranks, each rank's ops on its own
  // thread, meeting as a replica's do: every rank's buffer afterwards.
  // Empty when CollectivesUnsupported() says why not.
  virtual std::vector<std::vector<float>> AllReduce(const std::vector<std::vector<float>>& ranks) = 0;
  // Rank r's buffer holds [rows, widths[r]]; afterwards [rows, Σ widths].
  virtual std::vector<std::vector<float>> AllGather(const std::vector<std::vector<float>>& ranks, int64_t rows,
                                                    const std::vector<int64_t>& widths) = 0;
  virtual std::string CollectivesUnsupported() const { return ""; }
  // RmsNormAcrossRanks over ranks.size() ranks, rank r holding [rows,
  // widths_r] of each row and its weights' values; every rank's output.
  // Empty when NormAcrossRanksUnsupported() says why not.
  virtual std::vector<std::vector<float>> RmsNormAcrossRanks(const std::vector<std::vector<float>>& ranks,
                                                             const std::vector<std::vector<float>>& weights,
                                                             int64_t rows, float eps) = 0;
  virtual std::string NormAcrossRanksUnsupported() const { return ""; }
};

// How a test suite names and makes a backend. make() returns null when the
// backend cannot run here (no GPU); `why` then says so for the skip.
struct BackendParam {
  std::string name;
  std::function<std::unique_ptr<OpBackend>(std::string* why)> make;
};

}  // namespace kvfleet::engine::ops_test
