#include "model/arch/decoder_config.h"

#include <gtest/gtest.h>

#include "model/arch/architecture_registry.h"
#include "model/gguf/gguf_source.h"
#include "model/gguf/gguf_writer.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

// The config of a one-layer tiny Llama GGUF after `edit` (a later key of the
// same name wins in the reader).
absl::StatusOr<ModelConfig> ConfigWith(const testing::TempDir& dir, void (*edit)(GgufWriter&)) {
  GgufWriter w;
  EXPECT_TRUE(tools::BuildTinyModel({.num_layers = 1}, w).ok());
  edit(w);
  EXPECT_TRUE(w.WriteFile(dir.Path("h.gguf")).ok());
  auto s = GgufSource::Open(dir.Path("h.gguf"));
  if (!s.ok()) return s.status();
  return ReadModelConfig(**s);
}

TEST(DecoderConfigTest, KvHeadsMustDivideHeads) {
  testing::TempDir dir;
  auto c = ConfigWith(dir, [](GgufWriter& w) { w.SetUint32("llama.attention.head_count_kv", 3); });
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("3 KV heads"), std::string::npos) << c.status();
}

// Sizes that come from metadata are checked before anything is allocated
// by them (a forged file must fail with a message, not exhaust memory).
TEST(DecoderConfigTest, ABlockCountTheFileCannotHoldIsRefused) {
  testing::TempDir dir;
  auto c = ConfigWith(dir, [](GgufWriter& w) { w.SetUint32("llama.block_count", 100000000); });
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("block_count 100000000 needs at least 9 tensors per layer"), std::string::npos)
      << c.status();
}

TEST(DecoderConfigTest, AContextOverTheLimitIsRefused) {
  testing::TempDir dir;
  auto c = ConfigWith(dir, [](GgufWriter& w) { w.SetUint32("llama.context_length", 1u << 30); });
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("context length 1073741824"), std::string::npos) << c.status();
}

TEST(DecoderConfigTest, LinearRopeScalingIsRead) {
  testing::TempDir dir;
  auto c = ConfigWith(dir, [](GgufWriter& w) {
    w.SetString("llama.rope.scaling.type", "linear");
    w.SetFloat32("llama.rope.scaling.factor", 4.0f);
  });
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->ropes[0].position_scale, 0.25);
}

TEST(DecoderConfigTest, UnknownRopeScalingIsAnError) {
  testing::TempDir dir;
  auto c = ConfigWith(dir, [](GgufWriter& w) { w.SetString("llama.rope.scaling.type", "yarn"); });
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("yarn"), std::string::npos);
}

TEST(DecoderConfigTest, VocabSizeMustMatchEmbeddings) {
  testing::TempDir dir;
  auto c = ConfigWith(dir, [](GgufWriter& w) { w.SetUint32("llama.vocab_size", 5); });
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("token_embd.weight"), std::string::npos);
}

TEST(DecoderConfigTest, AnUnknownArchitectureIsRefusedByNameWithTheSupportedList) {
  testing::TempDir dir;
  auto c = ConfigWith(dir, [](GgufWriter& w) { w.SetString("general.architecture", "falcon"); });
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("'falcon'"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("qwen2"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("gemma3"), std::string::npos) << c.status();
}

// The frequency factors llama.cpp's converter writes for Llama 3.1
// (rope_scaling factor 8, low 1, high 4, original 8192, theta 500000,
// head_dim 128): high frequencies keep 1, low ones divide by 8, the band
// between is smoothed.
TEST(DecoderConfigTest, Llama3FrequencyFactorsFollowTheScalingRule) {
  const std::vector<float> f = Llama3FrequencyFactors(500000.0, 128, 8.0, 1.0, 4.0, 8192.0);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_EQ(f.front(), 1.0f);
  EXPECT_EQ(f.back(), 8.0f);
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]) << i;
  int smoothed = 0;
  for (float v : f) smoothed += v > 1.0f && v < 8.0f;
  EXPECT_GT(smoothed, 0);
}

}  // namespace
}  // namespace kvfleet::model
