#include "model/llama_hparams.h"

#include <gtest/gtest.h>

#include "model/gguf/gguf_writer.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

absl::StatusOr<LlamaHparams> HparamsWith(const testing::TempDir& dir, void (*edit)(GgufWriter&)) {
  GgufWriter w;
  EXPECT_TRUE(tools::BuildTinyModel({.num_layers = 1}, w).ok());
  edit(w);  // a later key of the same name wins in the reader
  EXPECT_TRUE(w.WriteFile(dir.Path("h.gguf")).ok());
  auto f = GgufFile::Open(dir.Path("h.gguf"));
  if (!f.ok()) return f.status();
  return ReadLlamaHparams(**f);
}

TEST(LlamaHparamsTest, KvHeadsMustDivideHeads) {
  testing::TempDir dir;
  auto hp = HparamsWith(dir, [](GgufWriter& w) { w.SetUint32("llama.attention.head_count_kv", 3); });
  EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(hp.status().message().find("head_count_kv"), std::string::npos);
}

// Sizes that come from metadata are checked before anything is allocated
// by them (a forged file must fail with a message, not exhaust memory).
TEST(LlamaHparamsTest, ABlockCountTheFileCannotHoldIsRefused) {
  testing::TempDir dir;
  auto hp = HparamsWith(dir, [](GgufWriter& w) { w.SetUint32("llama.block_count", 100000000); });
  EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(hp.status().message().find("block_count 100000000 needs at least 9 tensors per layer"), std::string::npos)
      << hp.status();
}

TEST(LlamaHparamsTest, AContextOverTheLimitIsRefused) {
  testing::TempDir dir;
  auto hp = HparamsWith(dir, [](GgufWriter& w) { w.SetUint32("llama.context_length", 1u << 30); });
  EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(hp.status().message().find("context_length 1073741824"), std::string::npos) << hp.status();
}

TEST(LlamaHparamsTest, LinearRopeScalingIsRead) {
  testing::TempDir dir;
  auto hp = HparamsWith(dir, [](GgufWriter& w) {
    w.SetString("llama.rope.scaling.type", "linear");
    w.SetFloat32("llama.rope.scaling.factor", 4.0f);
  });
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->rope_scaling, RopeScaling::kLinear);
  EXPECT_DOUBLE_EQ(hp->rope_scaling_factor, 4.0);
}

TEST(LlamaHparamsTest, UnknownRopeScalingIsAnError) {
  testing::TempDir dir;
  auto hp = HparamsWith(dir, [](GgufWriter& w) { w.SetString("llama.rope.scaling.type", "yarn"); });
  EXPECT_EQ(hp.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(hp.status().message().find("yarn"), std::string::npos);
}

TEST(LlamaHparamsTest, VocabSizeMustMatchEmbeddings) {
  testing::TempDir dir;
  auto hp = HparamsWith(dir, [](GgufWriter& w) { w.SetUint32("llama.vocab_size", 5); });
  EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(hp.status().message().find("token_embd.weight"), std::string::npos);
}

}  // namespace
}  // namespace kvfleet::model
