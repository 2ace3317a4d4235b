// The op harness, parameterised by backend (as llama.cpp's test-backend-ops):
// every op of model/arch/op_set.h on random inputs of several shapes, compared
// with the float64 reference under a per-op tolerance (normalised MSE), and
// a bit-exact batch-invariance case per op — the property every exactness
// guarantee of the engine rests on. A test binary includes this header and
// instantiates OpHarnessTest with the backends it has; a backend that cannot
// run here (no GPU) makes each case skip with the reason.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "common/float16.h"
#include "model/arch/op_set.h"
#include "tests/testing/random_data.h"
#include "tests/unit/engine/executor/ops/cpu_op_backend.h"
#include "tests/unit/engine/executor/ops/op_backend.h"
#include "tests/unit/engine/executor/ops/op_reference.h"

namespace kvfleet::engine::ops_test {

// Per-op tolerances on the normalised MSE against the float64 reference.
// Float32 arithmetic lands near 1e-14 on these sizes; the bounds leave room
// for long reductions without letting an indexing bug through (those give
// errors of order 1).
inline constexpr double kExact = 0.0;
inline constexpr double kMatMulTolerance = 1e-10;
inline constexpr double kNormTolerance = 1e-11;
inline constexpr double kRopeTolerance = 1e-11;
inline constexpr double kSwiGluTolerance = 1e-11;
inline constexpr double kAttentionTolerance = 1e-10;
inline constexpr double kAddTolerance = 1e-14;  // one rounding of the exact sum
inline constexpr double kGeluTolerance = 1e-11;

// The ops the cases below cover, registered where each case is defined, so
// that an op added to the op set without a harness case fails
// EveryOpOfTheOpSetHasACase (whatever process runs it).
inline std::set<model::Op>& CoveredOps() {
  static std::set<model::Op> ops;
  return ops;
}
inline bool Covers(std::initializer_list<model::Op> ops) {
  CoveredOps().insert(ops);
  return true;
}

class OpHarnessTest : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = GetParam().make(&why);
    if (backend_ == nullptr) GTEST_SKIP() << GetParam().name << " cannot run here: " << why;
  }

  // Rows [first, first + n) of `all`, each `width` wide.
  static std::vector<float> Slice(const std::vector<float>& all, int64_t first, int64_t n, int64_t width) {
    return {all.begin() + first * width, all.begin() + (first + n) * width};
  }

  std::unique_ptr<OpBackend> backend_;
};

inline std::string BackendName(const ::testing::TestParamInfo<BackendParam>& info) { return info.param.name; }
inline void PrintTo(const BackendParam& p, std::ostream* os) { *os << p.name; }

inline const bool kCoversEmbed = Covers({model::Op::kEmbed});
TEST_P(OpHarnessTest, EmbeddingDequantizesExactlyAndPerToken) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(DTypeName(dtype));
    const int64_t cols = RoundUpToBlock(dtype, 96);
    const HostWeights table = RandomWeights(dtype, 97, cols, 5);
    const std::vector<int32_t> ids = {3, 96, 0, 3, 41, 17, 88};
    const std::vector<float> out = backend_->Embed(table, ids);
    EXPECT_EQ(Nmse(out, RefEmbed(table, ids)), kExact);
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(backend_->Embed(table, {ids[i]}), Slice(out, static_cast<int64_t>(i), 1, cols)) << i;
    }
  }
}

inline const bool kCoversMatMul = Covers({model::Op::kMatMul});
TEST_P(OpHarnessTest, MatMulOfEveryWeightTypeMatchesTheReferenceAtEveryBatchSize) {
  struct Shape {
    int64_t n, k;
  };
  for (DType dtype : kAllDTypes) {
    for (Shape s : {Shape{64, 64}, Shape{136, 256}, Shape{200, 576}, Shape{96, 2048}}) {
      s.k = RoundUpToBlock(dtype, s.k);  // a K-quant's rows are whole super-blocks of 256
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " n=" << s.n << " k=" << s.k);
      const HostWeights w = RandomWeights(dtype, s.n, s.k, static_cast<uint32_t>(s.n + s.k));
      const int64_t m = 40;  // past every backend's few-rows path
      const std::vector<float> x = testing::RandomFloats(m * s.k, 9, 2.0f);
      const std::vector<float> y = backend_->MatMul(w, x, m);
      EXPECT_LT(Nmse(y, RefMatMul(w, x, m)), kMatMulTolerance);
      // The same rows at other batch sizes and offsets give the same bits.
      for (const int64_t sub : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{17}}) {
        const int64_t first = (m - sub) / 2;
        const std::vector<float> part = backend_->MatMul(w, Slice(x, first, sub, s.k), sub);
        EXPECT_EQ(part, Slice(y, first, sub, s.n)) << "rows " << first << ".." << first + sub;
      }
    }
  }
}

inline const bool kCoversAddLora = Covers({model::Op::kAddLora});
TEST_P(OpHarnessTest, MatMulWithMixedLoraAdaptersMatchesTheMergedReferenceRowByRow) {
  // A step of three adapters and the base model, as the engine lays it out:
  // runs of rows under one adapter each, base rows between them, and one
  // adapter that leaves this projection alone.
  const auto adapter = [](int32_t first, int32_t rows, int32_t rank, float scale, int64_t in, int64_t out,
                          uint32_t seed) {
    return HostLoraSegment{.first_row = first,
                           .rows = rows,
                           .rank = rank,
                           .scale = scale,
                           .a = testing::RandomFloats(rank * in, seed, 0.5f),
                           .b = testing::RandomFloats(out * rank, seed + 1, 0.5f)};
  };
  for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_K}) {
    const int64_t n = 136, k = RoundUpToBlock(dtype, 256), m = 23;
    SCOPED_TRACE(DTypeName(dtype));
    const HostWeights w = RandomWeights(dtype, n, k, 31);
    const std::vector<float> x = testing::RandomFloats(m * k, 17, 2.0f);
    std::vector<HostLoraSegment> segments = {adapter(0, 5, 8, 2.0f, k, n, 40), adapter(7, 9, 16, 0.25f, k, n, 50),
                                             HostLoraSegment{.first_row = 16, .rows = 3, .rank = 4},
                                             adapter(19, 4, 1, 1.5f, k, n, 60)};
    const std::vector<float> y = backend_->MatMulWithLora(w, x, m, segments);
    EXPECT_LT(Nmse(y, RefMergedLoraMatMul(w, x, m, segments)), kMatMulTolerance);
    // Rows 5, 6 are the base model's: MatMul alone, bit for bit.
    EXPECT_EQ(Slice(y, 5, 2, n), Slice(backend_->MatMul(w, x, m), 5, 2, n));
    // Each adapted row alone, as its request would run by itself: the same bits.
    for (int64_t row : {0, 4, 7, 15, 17, 19, 22}) {
      const HostLoraSegment* s = nullptr;
      for (const HostLoraSegment& seg : segments) {
        if (row >= seg.first_row && row < seg.first_row + seg.rows) s = &seg;
      }
      HostLoraSegment alone = *s;
      alone.first_row = 0;
      alone.rows = 1;
      EXPECT_EQ(backend_->MatMulWithLora(w, Slice(x, row, 1, k), 1, {alone}), Slice(y, row, 1, n)) << "row " << row;
    }
    // The adapter changed what it should: not the base's product.
    EXPECT_NE(Slice(y, 0, 1, n), Slice(backend_->MatMul(w, x, m), 0, 1, n));
  }
}

inline const bool kCoversRmsNorm = Covers({model::Op::kRmsNorm});
TEST_P(OpHarnessTest, RmsNormMatchesTheReferenceRowByRow) {
  // Per-head norms (64, 128, 256: Qwen3 and Gemma 3 over head_dim) and hidden widths.
  for (const int64_t n : {64, 128, 256, 576, 2048}) {
    const int64_t rows = 9;
    const std::vector<float> x = testing::RandomFloats(rows * n, static_cast<uint32_t>(n), 3.0f);
    const std::vector<float> weight = testing::RandomFloats(n, 2, 1.5f);
    const std::vector<float> y = backend_->RmsNorm(x, weight, rows, 1e-5f);
    EXPECT_LT(Nmse(y, RefRmsNorm(x, weight, rows, 1e-5f)), kNormTolerance) << n;
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(backend_->RmsNorm(Slice(x, r, 1, n), weight, 1, 1e-5f), Slice(y, r, 1, n)) << n << " row " << r;
    }
  }
}

inline const bool kCoversRope = Covers({model::Op::kRope});
TEST_P(OpHarnessTest, RopeRotatesEachTokenByItsOwnPosition) {
  const std::vector<float> factors = testing::RandomFloats(24, 4, 0.5f);  // for up to 48 rotated values
  std::vector<float> positive_factors;
  for (float f : factors) positive_factors.push_back(1.0f + std::abs(f));
  struct Case {
    kernels::RopeParams p;
    int64_t heads;
  };
  for (const Case& c :
       {Case{{.mode = kernels::RopeMode::kAdjacent, .head_dim = 64, .rot_dim = 64, .theta_base = 100000.0f}, 9},
        Case{{.mode = kernels::RopeMode::kHalves,
        .head_dim = 64,
        .rot_dim = 32,
        .theta_base = 10000.0f,
        .position_scale = 0.25f,
        .freq_factors = positive_factors.data()},
             4},
        Case{{.mode = kernels::RopeMode::kAdjacent, .head_dim = 16, .rot_dim = 16}, 2},
        // LongRoPE's shape (Phi-3): partial rotation, per-pair factors, a magnitude.
        Case{{.mode = kernels::RopeMode::kHalves,
        .head_dim = 64,
        .rot_dim = 48,
        .theta_base = 10000.0f,
        .freq_factors = positive_factors.data(),
        .magnitude = 1.19},
             3}}) {
    const std::vector<int32_t> positions = {0, 1, 17, 4095, 8191, 300, 17};
    const int64_t width = c.heads * c.p.head_dim;
    const std::vector<float> x = testing::RandomFloats(static_cast<int64_t>(positions.size()) * width, 8, 2.0f);
    const std::vector<float> y = backend_->Rope(c.p, x, positions, c.heads);
    EXPECT_LT(Nmse(y, RefRope(c.p, x, positions, c.heads)), kRopeTolerance);
    for (size_t t = 0; t < positions.size(); ++t) {
      EXPECT_EQ(backend_->Rope(c.p, Slice(x, static_cast<int64_t>(t), 1, width), {positions[t]}, c.heads),
                Slice(y, static_cast<int64_t>(t), 1, width))
          << t;
    }
  }
}

inline const bool kCoversElementwise = Covers({model::Op::kSwiGlu, model::Op::kGeluTanhMul, model::Op::kSilu,
                                               model::Op::kAdd, model::Op::kAddBias, model::Op::kScale});
TEST_P(OpHarnessTest, GatedActivationsBiasesScalesAndResidualAddAreElementwise) {
  const std::vector<float> gate = testing::RandomFloats(3 * 1536, 1, 8.0f), up = testing::RandomFloats(3 * 1536, 2);
  const std::vector<float> act = backend_->SwiGlu(gate, up);
  EXPECT_LT(Nmse(act, RefSwiGlu(gate, up)), kSwiGluTolerance);
  EXPECT_EQ(backend_->SwiGlu(Slice(gate, 1, 1, 1536), Slice(up, 1, 1, 1536)), Slice(act, 1, 1, 1536));
  const std::vector<float> gelu = backend_->GeluTanhMul(gate, up);
  EXPECT_LT(Nmse(gelu, RefGeluTanhMul(gate, up)), kGeluTolerance);
  EXPECT_EQ(backend_->GeluTanhMul(Slice(gate, 1, 1, 1536), Slice(up, 1, 1, 1536)), Slice(gelu, 1, 1, 1536));
  // SiLU alone, in place (the draft heads' residual blocks).
  const std::vector<float> silu = backend_->Silu(gate);
  EXPECT_LT(Nmse(silu, RefSilu(gate)), kSwiGluTolerance);
  EXPECT_EQ(backend_->Silu(Slice(gate, 2, 1, 1536)), Slice(silu, 2, 1, 1536));
  const std::vector<float> sum = backend_->Add(gate, up);
  EXPECT_LT(Nmse(sum, RefAdd(gate, up)), kAddTolerance);
  EXPECT_EQ(backend_->Add(Slice(gate, 2, 1, 1536), Slice(up, 2, 1, 1536)), Slice(sum, 2, 1, 1536));
  // A bias row added to each of 3 rows (Qwen2's query, key and value biases).
  const std::vector<float> bias = testing::RandomFloats(1536, 5, 4.0f);
  const std::vector<float> biased = backend_->AddBias(gate, bias, 3);
  EXPECT_LT(Nmse(biased, RefAddBias(gate, bias, 3)), kAddTolerance);
  EXPECT_EQ(backend_->AddBias(Slice(gate, 1, 1, 1536), bias, 1), Slice(biased, 1, 1, 1536));
  // Gemma's embedding scale, √640.
  const std::vector<float> scaled = backend_->Scale(gate, 25.298221f);
  EXPECT_LT(Nmse(scaled, RefScale(gate, 25.298221f)), kAddTolerance);
  EXPECT_EQ(backend_->Scale(Slice(gate, 2, 1, 1536), 25.298221f), Slice(scaled, 2, 1, 1536));
}

inline const bool kCoversLogits = Covers({model::Op::kLogits});
TEST_P(OpHarnessTest, LogitsNormAndProjectOnlyTheRowsAsked) {
  for (DType dtype : {DType::kQ4_1, DType::kQ8_0, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const int64_t hidden = 128, vocab = 500, tokens = 12;
    const HostWeights head = RandomWeights(dtype, vocab, hidden, 77);
    const std::vector<float> x = testing::RandomFloats(tokens * hidden, 3, 4.0f);
    const std::vector<float> norm = testing::RandomFloats(hidden, 6, 2.0f);
    const std::vector<int32_t> rows = {0, 5, 6, 11};
    const std::vector<float> logits = backend_->Logits(x, rows, norm, head, 1e-5f);
    EXPECT_LT(Nmse(logits, RefLogits(x, rows, norm, head, 1e-5f)), kMatMulTolerance);
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(backend_->Logits(x, {rows[i]}, norm, head, 1e-5f), Slice(logits, static_cast<int64_t>(i), 1, vocab));
    }
  }
}

// Backends round differently (sums in other orders), so they agree within
// the tolerances, not bit for bit: what "CPU and GPU give close numbers"
// means, per op.
TEST_P(OpHarnessTest, AgreesWithTheCpuBackendWithinTheTolerances) {
  const std::unique_ptr<OpBackend> cpu = MakeCpuOpBackend(2);
  const auto close = [](const std::vector<float>& a, const std::vector<float>& b, double tolerance) {
    return Nmse(a, std::vector<double>(b.begin(), b.end())) < tolerance;
  };
  for (DType dtype : kAllDTypes) {
    const int64_t k = RoundUpToBlock(dtype, 576);
    const HostWeights w = RandomWeights(dtype, 160, k, 3);
    const std::vector<float> x = testing::RandomFloats(5 * k, 4, 2.0f);
    EXPECT_TRUE(close(backend_->MatMul(w, x, 5), cpu->MatMul(w, x, 5), kMatMulTolerance)) << DTypeName(dtype);
    const std::vector<int32_t> ids = {0, 159, 7};
    EXPECT_EQ(backend_->Embed(w, ids), cpu->Embed(w, ids)) << "dequantization is exact: " << DTypeName(dtype);
  }
  const std::vector<float> x = testing::RandomFloats(4 * 576, 5, 3.0f), weight = testing::RandomFloats(576, 6);
  EXPECT_TRUE(close(backend_->RmsNorm(x, weight, 4, 1e-5f), cpu->RmsNorm(x, weight, 4, 1e-5f), kNormTolerance));
  const kernels::RopeParams rope{.head_dim = 64, .rot_dim = 64, .theta_base = 100000.0f};
  const std::vector<int32_t> positions = {3, 8000, 40, 41};
  const std::vector<float> heads = testing::RandomFloats(4 * 3 * 64, 7);
  EXPECT_EQ(backend_->Rope(rope, heads, positions, 3), cpu->Rope(rope, heads, positions, 3))
      << "one table of angles and the same products: RoPE agrees bit for bit";
}

// One sequence's Q/K/V per position, and the steps that compute it: each
// step a list of (start, length) pieces of that sequence. The cache starts
// empty; every step writes its tokens' K/V and attends.
struct AttentionShape {
  int64_t heads, kv_heads, head_dim, block_size;
  kernels::KvCacheDtype dtype = kernels::KvCacheDtype::kF16;
};

class AttentionRun {
 public:
  AttentionRun(const AttentionShape& s, int64_t length, uint32_t seed)
      : s_(s),
        length_(length),
        q_(testing::RandomFloats(length * s.heads * s.head_dim, seed, 2.0f)),
        k_(testing::RandomFloats(length * s.kv_heads * s.head_dim, seed + 1, 2.0f)),
        v_(testing::RandomFloats(length * s.kv_heads * s.head_dim, seed + 2, 2.0f)) {}

  int64_t blocks() const { return (length_ + s_.block_size - 1) / s_.block_size; }

  // Runs `steps` (pieces of one chunk each) with the sequence's blocks at
  // `table` (a permutation of physical blocks, optionally behind other
  // sequences in the same batch: `others` adds that many decoy chunks of a
  // second sequence per step). Returns each position's output, and checks
  // every step against the reference and the cache write against RefWriteKv.
  std::vector<std::vector<float>> Run(OpBackend& backend, const std::vector<std::pair<int32_t, int32_t>>& steps,
                                      const std::vector<BlockId>& table, bool with_decoy, int64_t window = 0) {
    const int64_t num_blocks = 2 * blocks() + 8;
    const kernels::KvCacheLayout layout{num_blocks, s_.kv_heads, s_.block_size, s_.head_dim, s_.dtype};
    AttentionCase c{
        .layout = layout, .num_heads = s_.heads, .scale = 1.0f / std::sqrt(float(s_.head_dim)), .window = window};
    c.k_cache.assign(static_cast<size_t>(layout.BytesPerLayer()), 0);  // zeros in every dtype
    c.v_cache = c.k_cache;
    if (kernels::KvScalesKeyChannels(s_.dtype)) {
      // A spread of powers of two (1 to 16) over the channels of each head.
      for (int64_t i = 0; i < s_.kv_heads * s_.head_dim; ++i) c.key_scales.push_back(std::ldexp(1.0f, (i * 7) % 5));
    }
    // The decoy sequence lives in the last blocks and re-attends its first tokens.
    std::vector<BlockId> decoy_table;
    for (int64_t b = num_blocks - 8; b < num_blocks; ++b) decoy_table.emplace_back(static_cast<int32_t>(b));
    std::vector<std::vector<float>> outputs(static_cast<size_t>(length_));
    const int64_t qw = s_.heads * s_.head_dim, kw = s_.kv_heads * s_.head_dim;
    for (const auto& [start, n] : steps) {
      ForwardBatchBuilder builder(static_cast<int32_t>(s_.block_size));
      c.q.clear();
      c.k.clear();
      c.v.clear();
      const auto add = [&](int32_t first, int32_t count, const std::vector<BlockId>& t, const std::vector<float>& q,
                           const std::vector<float>& k, const std::vector<float>& v) {
        const std::vector<model::TokenId> ids(static_cast<size_t>(count), 0);
        builder.AddChunk(ids, first, t, LogitsWanted::kNone);
        c.q.insert(c.q.end(), q.begin() + first * qw, q.begin() + (first + count) * qw);
        c.k.insert(c.k.end(), k.begin() + first * kw, k.begin() + (first + count) * kw);
        c.v.insert(c.v.end(), v.begin() + first * kw, v.begin() + (first + count) * kw);
      };
      if (with_decoy) add(0, 5, decoy_table, q_, v_, k_);
      add(start, n, table, q_, k_, v_);
      const ForwardBatch& batch = builder.Finish();
      c.batch = &batch;
      std::vector<uint8_t> want_k, want_v;
      RefWriteKv(c, want_k, want_v);
      const std::vector<double> ref = RefAttention(c);
      const std::vector<float> out = backend.Attention(c);
      EXPECT_LT(Nmse(out, ref), kAttentionTolerance) << "step at " << start << " of " << n;
      EXPECT_TRUE(c.k_cache == want_k && c.v_cache == want_v) << "the K/V write differs at step " << start;
      const int32_t own = with_decoy ? 5 : 0;
      for (int32_t i = 0; i < n; ++i) {
        outputs[static_cast<size_t>(start + i)].assign(out.begin() + (own + i) * qw, out.begin() + (own + i + 1) * qw);
      }
    }
    return outputs;
  }

  // The identity table, and a scattered one (blocks in reverse, odd ids).
  std::vector<BlockId> InOrder() const {
    std::vector<BlockId> t;
    for (int64_t b = 0; b < blocks(); ++b) t.emplace_back(static_cast<int32_t>(b));
    return t;
  }
  std::vector<BlockId> Scattered() const {
    std::vector<BlockId> t;
    for (int64_t b = blocks() - 1; b >= 0; --b) t.emplace_back(static_cast<int32_t>(2 * b + 1));
    return t;
  }

 private:
  AttentionShape s_;
  int64_t length_;
  std::vector<float> q_, k_, v_;
};

// The steps of one prefill in pieces of `chunk`, then decode one token at a time from `decode_from`.
inline std::vector<std::pair<int32_t, int32_t>> Steps(int32_t length, int32_t chunk, int32_t decode_from) {
  std::vector<std::pair<int32_t, int32_t>> steps;
  for (int32_t p = 0; p < decode_from; p += chunk) steps.emplace_back(p, std::min(chunk, decode_from - p));
  for (int32_t p = decode_from; p < length; ++p) steps.emplace_back(p, 1);
  return steps;
}

inline const bool kCoversAttention = Covers({model::Op::kWriteKv, model::Op::kAttention});
TEST_P(OpHarnessTest, AttentionIsTheSameWholeChunkedDecodedBatchedAndRelocated) {
  // Shapes of the tiny test models, SmolLM2 (9 of 3 heads of 64) and the
  // Llama-3.2-1B class (32 of 8 of 128); contexts that cross the CUDA
  // decode kernel's fixed partitions.
  struct Case {
    AttentionShape shape;
    int32_t length;
  };
  for (const Case& c : {Case{{4, 2, 16, 4}, 70}, Case{{9, 3, 64, 16}, 400}, Case{{32, 8, 128, 16}, 300}}) {
    SCOPED_TRACE(::testing::Message() << c.shape.heads << "/" << c.shape.kv_heads << " heads of " << c.shape.head_dim
                                      << ", " << c.length << " tokens");
    AttentionRun run(c.shape, c.length, 31);
    const auto whole = run.Run(*backend_, Steps(c.length, c.length, c.length), run.InOrder(), false);
    const int32_t decode_from = c.length - 23;
    const auto chunked = run.Run(*backend_, Steps(c.length, 37, decode_from), run.Scattered(), true);
    const auto decoded = run.Run(*backend_, Steps(c.length, 1, 1), run.Scattered(), false);
    for (int32_t p = 0; p < c.length; ++p) {
      ASSERT_EQ(chunked[p], whole[p]) << "position " << p << ": chunks of 37 + decode, batched, scattered";
      ASSERT_EQ(decoded[p], whole[p]) << "position " << p << ": one token at a time";
    }
  }
}

// A sliding window (Gemma 3's local layers, Mistral): key k is visible to
// query q iff q − k < window. Which keys a query reads, and their order,
// depend only on q and the window, so every way of computing a position
// gives the same bits; windows shorter than a block, across blocks, across
// the CUDA kernels' 256-key partitions, and longer than the sequence
// (which is full attention, bit for bit).
TEST_P(OpHarnessTest, WindowedAttentionIsTheSameWholeChunkedDecodedAndBatched) {
  struct Case {
    AttentionShape shape;
    int32_t length;
    int64_t window;
  };
  for (const Case& c : {Case{{4, 2, 16, 4}, 70, 3}, Case{{4, 2, 16, 4}, 70, 8}, Case{{4, 1, 256, 16}, 600, 300},
                        Case{{9, 3, 64, 16}, 400, 37}, Case{{9, 3, 64, 16}, 120, 4096}}) {
    SCOPED_TRACE(::testing::Message() << c.shape.heads << "/" << c.shape.kv_heads << " heads of " << c.shape.head_dim
                                      << ", " << c.length << " tokens, window " << c.window);
    AttentionRun run(c.shape, c.length, 47);
    const auto whole = run.Run(*backend_, Steps(c.length, c.length, c.length), run.InOrder(), false, c.window);
    const auto chunked = run.Run(*backend_, Steps(c.length, 29, c.length - 11), run.Scattered(), true, c.window);
    const auto decoded = run.Run(*backend_, Steps(c.length, 1, 1), run.Scattered(), false, c.window);
    for (int32_t p = 0; p < c.length; ++p) {
      ASSERT_EQ(chunked[p], whole[p]) << "position " << p << ": chunks of 29 + decode, batched, scattered";
      ASSERT_EQ(decoded[p], whole[p]) << "position " << p << ": one token at a time";
    }
    if (c.window >= c.length) {
      const auto full = run.Run(*backend_, Steps(c.length, c.length, c.length), run.InOrder(), false, 0);
      for (int32_t p = 0; p < c.length; ++p) ASSERT_EQ(full[p], whole[p]) << "a window past the sequence is full";
    }
  }
}

// An 8-bit KV cache (int8 rows with a scale, the same with rotated keys,
// with scaled and rotated keys, FP8 E4M3): the write is the codec's bit for
// bit on every backend, attention reads those values, and a position's
// result is the same however it is computed, as with float16.
TEST_P(OpHarnessTest, EightBitKvIsTheSameWholeChunkedDecodedAndBatched) {
  for (kernels::KvCacheDtype dtype : {kernels::KvCacheDtype::kInt8, kernels::KvCacheDtype::kInt8Rotated,
                                      kernels::KvCacheDtype::kInt8RotatedScaled, kernels::KvCacheDtype::kFp8E4M3}) {
    std::vector<AttentionShape> shapes = {AttentionShape{4, 2, 16, 4, dtype}, AttentionShape{9, 3, 64, 16, dtype},
                                          AttentionShape{8, 2, 128, 3, dtype}};
    // Rotated keys at the widest head a backend supports (the CUDA kernel's
    // per-thread row is that wide).
    if (kernels::KvRotatesKeys(dtype)) shapes.push_back(AttentionShape{4, 2, 256, 8, dtype});
    for (const AttentionShape shape : shapes) {
      SCOPED_TRACE(::testing::Message() << kernels::KvCacheDtypeName(dtype) << ", " << shape.heads << "/"
                                        << shape.kv_heads << " heads of " << shape.head_dim << ", blocks of "
                                        << shape.block_size);
      const int32_t length = 90;
      AttentionRun run(shape, length, 53);
      const auto whole = run.Run(*backend_, Steps(length, length, length), run.InOrder(), false);
      const auto chunked = run.Run(*backend_, Steps(length, 29, length - 7), run.Scattered(), true);
      // A window, decoded one token at a time: Run checks each step against the reference.
      run.Run(*backend_, Steps(length, 1, 1), run.Scattered(), false, 17);
      for (int32_t p = 0; p < length; ++p) {
        ASSERT_EQ(chunked[p], whole[p]) << "position " << p << ": chunks of 29 + decode, batched, scattered";
      }
    }
  }
}

// OLMo 2's query norm over every head, the heads split across ranks: each
// rank's values scaled by the whole row's mean square, close to the
// reference; on one rank, RmsNorm itself, bit for bit.
inline const bool kCoversNormAcrossRanks = Covers({model::Op::kRmsNormAcrossRanks});
TEST_P(OpHarnessTest, RmsNormAcrossRanksNormalisesTheWholeRow) {
  const int64_t rows = 5;
  const std::vector<int64_t> widths = {256, 128, 128};  // 2, 1 and 1 heads of 128
  const int64_t total = 512;
  const std::vector<float> x = testing::RandomFloats(rows * total, 91, 3.0f);
  const std::vector<float> weight = testing::RandomFloats(total, 92, 1.5f);
  EXPECT_EQ(backend_->RmsNormAcrossRanks({x}, {weight}, rows, 1e-5f)[0], backend_->RmsNorm(x, weight, rows, 1e-5f));
  if (const std::string why = backend_->NormAcrossRanksUnsupported(); !why.empty()) GTEST_SKIP() << why;
  const std::vector<double> expected = RefRmsNorm(x, weight, rows, 1e-5f);
  for (const size_t n : {size_t{2}, size_t{3}}) {
    SCOPED_TRACE(::testing::Message() << n << " ranks");
    // Rank r's columns of every row, and its weights' values.
    std::vector<std::vector<float>> parts(n), part_weights(n);
    std::vector<int64_t> begins;
    int64_t begin = 0;
    for (size_t r = 0; r < n; ++r) {
      const int64_t w = n == 2 ? total / 2 : widths[r];
      begins.push_back(begin);
      for (int64_t row = 0; row < rows; ++row) {
        parts[r].insert(parts[r].end(), x.begin() + row * total + begin, x.begin() + row * total + begin + w);
      }
      part_weights[r].assign(weight.begin() + begin, weight.begin() + begin + w);
      begin += w;
    }
    const std::vector<std::vector<float>> got = backend_->RmsNormAcrossRanks(parts, part_weights, rows, 1e-5f);
    ASSERT_EQ(got.size(), n);
    std::vector<float> whole(static_cast<size_t>(rows * total));
    for (size_t r = 0; r < n; ++r) {
      const int64_t w = static_cast<int64_t>(part_weights[r].size());
      for (int64_t row = 0; row < rows; ++row) {
        std::copy_n(got[r].begin() + row * w, w, whole.begin() + row * total + begins[r]);
      }
    }
    EXPECT_LT(Nmse(whole, expected), kNormTolerance);
  }
}

// A tensor-parallel rank's slice of the vocabulary: its own tokens' rows,
// zeros for the others', so the ranks' embeddings sum to the whole table's.
TEST_P(OpHarnessTest, EmbeddingOfAVocabularySliceIsZeroOutsideIt) {
  for (DType dtype : {DType::kF32, DType::kQ4_K, DType::kQ8_0}) {
    SCOPED_TRACE(DTypeName(dtype));
    const int64_t vocab = 60, cols = 256;
    const HostWeights whole = RandomWeights(dtype, vocab, cols, 41);
    const std::vector<int32_t> ids = {0, 19, 20, 59, 33, 20, 7};
    const std::vector<float> expected = backend_->Embed(whole, ids);
    std::vector<float> sum(expected.size(), 0.0f);
    for (const auto& [first, rows] : {std::pair<int64_t, int64_t>{0, 20}, {20, 25}, {45, 15}}) {
      HostWeights slice{.dtype = dtype, .rows = rows, .cols = cols};
      const size_t row_bytes = static_cast<size_t>(RowBytes(dtype, cols));
      slice.bytes.assign(whole.bytes.begin() + first * row_bytes, whole.bytes.begin() + (first + rows) * row_bytes);
      const std::vector<float> part = backend_->Embed(slice, ids, first);
      for (size_t t = 0; t < ids.size(); ++t) {
        const bool mine = ids[t] >= first && ids[t] < first + rows;
        const std::vector<float> row = Slice(part, static_cast<int64_t>(t), 1, cols);
        EXPECT_EQ(row, mine ? Slice(expected, static_cast<int64_t>(t), 1, cols) : std::vector<float>(cols, 0.0f))
            << "token " << ids[t] << " on the slice from " << first;
      }
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    }
    EXPECT_EQ(sum, expected);
  }
}

// The meeting points of tensor-parallel ranks: the sum in rank order,
// bit for bit on every rank (a column whose sum depends on the order proves
// which one), and the ranks' columns side by side in rank order.
inline const bool kCoversCollectives = Covers({model::Op::kAllReduce, model::Op::kAllGather});
TEST_P(OpHarnessTest, CollectivesSumAndGatherInRankOrderOnEveryRank) {
  if (const std::string why = backend_->CollectivesUnsupported(); !why.empty()) GTEST_SKIP() << why;
  for (int32_t n : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << n << " ranks");
    std::vector<std::vector<float>> parts;
    for (int32_t r = 0; r < n; ++r) parts.push_back(testing::RandomFloats(1000, 50 + r, 4.0f));
    // ((1e8 + −1e8) + 1) = 1, where 1e8 + (−1e8 + 1) rounds to 0.
    const float ordered[] = {1e8f, -1e8f, 1.0f};
    for (int32_t r = 0; r < n; ++r) parts[r][7] = ordered[r];
    std::vector<float> expected = parts[0];
    for (int32_t r = 1; r < n; ++r) {
      for (size_t i = 0; i < expected.size(); ++i) expected[i] += parts[r][i];
    }
    const std::vector<std::vector<float>> reduced = backend_->AllReduce(parts);
    ASSERT_EQ(reduced.size(), static_cast<size_t>(n));
    for (int32_t r = 0; r < n; ++r) EXPECT_EQ(reduced[r], expected) << "rank " << r;
    if (n == 3) {
      EXPECT_EQ(reduced[0][7], 1.0f);
    }

    const std::vector<int64_t> all_widths = {3, 5, 2};
    const std::vector<int64_t> widths(all_widths.begin(), all_widths.begin() + n);
    const int64_t rows = 4;
    int64_t total = 0;
    std::vector<std::vector<float>> columns;
    for (int32_t r = 0; r < n; ++r) {
      columns.push_back(testing::RandomFloats(rows * widths[r], 70 + r));
      total += widths[r];
    }
    std::vector<float> whole;
    for (int64_t row = 0; row < rows; ++row) {
      for (int32_t r = 0; r < n; ++r) {
        whole.insert(whole.end(), columns[r].begin() + row * widths[r], columns[r].begin() + (row + 1) * widths[r]);
      }
    }
    const std::vector<std::vector<float>> gathered = backend_->AllGather(columns, rows, widths);
    ASSERT_EQ(gathered.size(), static_cast<size_t>(n));
    for (int32_t r = 0; r < n; ++r) {
      EXPECT_EQ(gathered[r], whole) << "rank " << r;
      EXPECT_EQ(static_cast<int64_t>(gathered[r].size()), rows * total);
    }
  }
}

// Every op a layer sequence may call has a case above, on every backend.
TEST_P(OpHarnessTest, EveryOpOfTheOpSetHasACase) {
  for (model::Op op : model::kAllOps) {
    EXPECT_TRUE(CoveredOps().count(op) > 0) << model::OpName(op) << " has no op harness case";
  }
}

}  // namespace kvfleet::engine::ops_test
