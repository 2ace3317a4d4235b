// Packing a real model's matmul weights for 8-bit activations: every
// eligible matrix is packed at the size the memory planner counts, the
// mapped file's pages of the packed tensors leave this process's memory,
// and the packed copy computes exactly what the row layout defines (read
// back from the file after its pages were dropped).
#include "engine/executor/cpu/q8_packed_weights.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/matmul_q8.h"
#include "tests/testing/default_model.h"
#include "tests/testing/random_data.h"

namespace kvfleet::engine {
namespace {

// Resident bytes of this process's mappings of `path` (/proc/self/smaps).
int64_t ResidentBytesOfMapping(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  int64_t kib = 0;
  while (std::getline(smaps, line)) {
    if (!line.empty() && line.find('-') != std::string::npos && line.find(':') != 4 &&
        line.find("kB") == std::string::npos) {
      inside = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      std::istringstream(line.substr(4)) >> kib;
      return kib * 1024;
    }
  }
  return -1;
}

TEST(Q8PackedWeightsTest, PacksEveryMatrixDropsTheirMappedPagesAndComputesTheRowLayoutsResult) {
  if (!testing::DefaultModelFetched()) GTEST_SKIP() << testing::kDefaultModelMissing;
  auto loaded = model::Model::Load(testing::kDefaultModelPath);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const model::Model& model = **loaded;
  const model::DecoderWeights& w = model.weights();

  // Every weight's pages resident first, as after a float32 run.
  uint64_t touched = 0;
  for (const model::LayerWeights& l : w.layers) {
    for (const model::WeightView* v : {&l.attn_q, &l.ffn_down}) {
      const auto* b = static_cast<const uint8_t*>(v->data);
      for (int64_t i = 0; i < RowBytes(v->dtype, v->rows * v->cols); i += 4096) touched += b[i];
    }
  }
  const auto* embd = static_cast<const uint8_t*>(w.token_embd.data);
  for (int64_t i = 0; i < RowBytes(w.token_embd.dtype, w.token_embd.rows * w.token_embd.cols); i += 4096) {
    touched += embd[i];
  }
  const int64_t before = ResidentBytesOfMapping(model.source().path());
  ASSERT_GT(before, 0) << "no mapping of " << model.source().path() << " in /proc/self/smaps (" << touched << ")";

  ThreadPool pool(2);
  absl::StatusOr<Q8PackedWeights> packed_or = Q8PackedWeights::Pack(model, pool);
  ASSERT_TRUE(packed_or.ok()) << packed_or.status();
  const Q8PackedWeights& packed = *packed_or;
  EXPECT_EQ(packed.tensors(), 7 * static_cast<int64_t>(w.layers.size()) + 1);  // + the (tied) output head
  EXPECT_EQ(packed.bytes(), packed.source_bytes());
  // SmolLM2 ties its output head to the embedding table, which the lookup
  // reads again in the row layout.
  EXPECT_EQ(packed.reread_bytes(), RowBytes(w.token_embd.dtype, w.token_embd.rows * w.token_embd.cols));
  const int64_t after = ResidentBytesOfMapping(model.source().path());
  std::printf("mapped file resident: %.1f MB before packing, %.1f MB after; packed copy %.1f MB\n", before / 1e6,
              after / 1e6, packed.bytes() / 1e6);
  EXPECT_LT(after, packed.bytes() / 20) << "the packed tensors' pages are still mapped in";

  EXPECT_EQ(packed.Find(w.layers[0].attn_norm.data), nullptr);
  for (const model::WeightView* v : {&w.layers[0].attn_k, &w.layers[29].ffn_down, &w.output}) {
    const kernels::Q8PanelWeights* panels = packed.Find(v->data);
    ASSERT_NE(panels, nullptr) << v->name;
    ASSERT_EQ(panels->n, v->rows);
    const int64_t m = 3;
    const std::vector<float> x = kvfleet::testing::RandomFloats(m * v->cols, 9, 1.0f);
    std::vector<float> y(m * v->rows);
    kernels::MatMulQ8(*panels, x.data(), m, y.data(), pool);
    std::vector<kernels::BlockQ8A> xq(v->cols / 32);
    for (int64_t i = 0; i < m; ++i) {
      kernels::QuantizeActivationRowReference(x.data() + i * v->cols, v->cols, xq.data());
      for (int64_t j = 0; j < v->rows; j += 97) {
        const auto* row = static_cast<const uint8_t*>(v->data) + j * RowBytes(v->dtype, v->cols);
        ASSERT_EQ(y[i * v->rows + j], kernels::DotQ8Reference(v->dtype, row, xq.data(), v->cols))
            << v->name << " token " << i << " row " << j;
      }
    }
  }
}

// A real K-quant file (Qwen2.5-Coder-0.5B Q4_K_M: Q5_0, Q4_K, Q6_K and Q8_0
// matrices): every matrix is packed, each type's panels compute what the
// scalar definition computes on the file's rows, and the packed copy is
// counted as what it takes (the K-quants' unpacked sub-block scales: a few
// percent over the file's bytes).
TEST(Q8PackedWeightsTest, PacksEveryMatrixOfARealKQuantFileExactly) {
  const std::string path = KVFLEET_SOURCE_DIR "/models/qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not fetched: run scripts/fetch_model.sh";
  auto loaded = model::Model::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const model::DecoderWeights& w = (*loaded)->weights();
  ThreadPool pool(2);
  absl::StatusOr<Q8PackedWeights> packed_or = Q8PackedWeights::Pack(**loaded, pool);
  ASSERT_TRUE(packed_or.ok()) << packed_or.status();
  const Q8PackedWeights& packed = *packed_or;
  EXPECT_EQ(packed.tensors(), 7 * static_cast<int64_t>(w.layers.size()) + 1);
  int64_t want_bytes = 0;
  std::map<DType, const model::WeightView*> one_of_each;
  for (const model::LayerWeights& l : w.layers) {
    for (const model::WeightView* v : l.Matrices()) {
      want_bytes += kernels::Q8PanelBytes(v->dtype, v->rows, v->cols);
      one_of_each.emplace(v->dtype, v);
    }
  }
  want_bytes += kernels::Q8PanelBytes(w.output.dtype, w.output.rows, w.output.cols);
  one_of_each.emplace(w.output.dtype, &w.output);
  EXPECT_EQ(packed.bytes(), want_bytes);
  EXPECT_GE(packed.bytes(), packed.source_bytes());
  EXPECT_LE(static_cast<double>(packed.bytes()), 1.03 * static_cast<double>(packed.source_bytes()));
  std::printf("packed %.1f MB for %.1f MB of rows, %zu types\n", packed.bytes() / 1e6, packed.source_bytes() / 1e6,
              one_of_each.size());
  EXPECT_GE(one_of_each.size(), 3u);
  for (const auto& [dtype, v] : one_of_each) {
    const kernels::Q8PanelWeights* panels = packed.Find(v->data);
    ASSERT_NE(panels, nullptr) << v->name;
    const std::vector<float> x = kvfleet::testing::RandomFloats(v->cols, 10, 1.0f);
    std::vector<float> y(v->rows);
    kernels::MatMulQ8(*panels, x.data(), 1, y.data(), pool);
    std::vector<kernels::BlockQ8A> xq(v->cols / 32);
    kernels::QuantizeActivationRowReference(x.data(), v->cols, xq.data());
    for (int64_t j = 0; j < v->rows; j += 61) {
      const auto* row = static_cast<const uint8_t*>(v->data) + j * RowBytes(v->dtype, v->cols);
      ASSERT_EQ(y[j], kernels::DotQ8Reference(v->dtype, row, xq.data(), v->cols))
          << v->name << " (" << DTypeName(dtype) << ") row " << j;
    }
  }
}

}  // namespace
}  // namespace kvfleet::engine
