// Phi-3's configuration as its published checkpoints state it: LongRoPE
// (type "longrope" or the older "su"), a partial rotary factor (Phi-4 mini),
// and a window that binds only when shorter than the context.
#include "model/arch/phi3/phi3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "model/arch/architecture_registry.h"
#include "model/hf/hf_source.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::model {
namespace {

// A config.json of Phi-3's shape family, reduced (head_dim 16), with the
// keys a release states after `extra`.
std::string PhiConfig(const std::string& extra) {
  return R"({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 4, "vocab_size": 256, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": false)" +
         extra + "}";
}

std::string Floats(int n, float first, float step) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(first + step * static_cast<float>(i));
  return s + "]";
}

absl::StatusOr<ModelConfig> Read(const testing::TempDir& dir, const std::string& json) {
  const std::string path = dir.Path("config.json");
  std::ofstream(path) << json;
  ASSIGN_OR_RETURN(std::unique_ptr<HfSource> s, HfSource::OpenConfig(path));
  return ReadModelConfig(*s);
}

TEST(Phi3ConfigTest, LongRopeOfThe128kModelsChoosesTheLongFactorsForTheirContext) {
  testing::TempDir dir;
  for (const char* type : {"longrope", "su"}) {
    auto c = Read(dir, PhiConfig(std::string(R"(, "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096, "sliding_window": 262144,
        "rope_scaling": {"type": ")") +
                                 type + R"(", "short_factor": )" + Floats(8, 1.0f, 0.5f) + R"(, "long_factor": )" +
                                 Floats(8, 2.0f, 1.0f) + "}"));
    ASSERT_TRUE(c.ok()) << type << ": " << c.status();
    const RopeConfig& rope = c->ropes[0];
    EXPECT_EQ(rope.dim, 16);
    EXPECT_EQ(rope.pairing, RopePairing::kHalves);
    EXPECT_EQ(rope.long_factors_above, 4096);
    EXPECT_EQ(rope.freq_factors, (std::vector<float>{1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5}));
    EXPECT_EQ(rope.long_freq_factors, (std::vector<float>{2, 3, 4, 5, 6, 7, 8, 9}));
    // Hugging Face's derived factor: √(1 + ln(131072 / 4096) / ln 4096).
    EXPECT_NEAR(rope.magnitude, std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)), 1e-9);
    // A window longer than the context binds nothing.
    EXPECT_EQ(c->max_window(), 0);
    EXPECT_EQ(&rope.FactorsFor(c->context_length), &rope.long_freq_factors);
  }
}

TEST(Phi3ConfigTest, TheFactorsAreChosenOnceByTheServedContext) {
  RopeConfig rope{.dim = 4, .freq_factors = {1, 2}};
  rope.long_freq_factors = {3, 4};
  rope.long_factors_above = 4096;
  EXPECT_EQ(&rope.FactorsFor(4096), &rope.freq_factors);
  EXPECT_EQ(&rope.FactorsFor(4097), &rope.long_freq_factors);
  rope.long_freq_factors.clear();  // not LongRoPE: the one set, at any length
  EXPECT_EQ(&rope.FactorsFor(1 << 20), &rope.freq_factors);
}

TEST(Phi3ConfigTest, APartialRotaryFactorRotatesThatShareOfEachHead) {
  testing::TempDir dir;
  // Phi-4 mini: three quarters of each head rotate, 6 of 8 pairs here.
  auto c = Read(dir, PhiConfig(R"(, "max_position_embeddings": 131072, "partial_rotary_factor": 0.75,
      "original_max_position_embeddings": 4096,
      "rope_scaling": {"type": "longrope", "short_factor": )" +
                               Floats(6, 1.0f, 0.0f) + R"(, "long_factor": )" + Floats(6, 2.0f, 0.0f) + "}"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ropes[0].dim, 12);
  // The factors must be one per rotated pair.
  auto wrong = Read(dir, PhiConfig(R"(, "max_position_embeddings": 131072, "partial_rotary_factor": 0.75,
      "original_max_position_embeddings": 4096,
      "rope_scaling": {"type": "longrope", "short_factor": )" +
                                   Floats(8, 1.0f, 0.0f) + R"(, "long_factor": )" + Floats(8, 2.0f, 0.0f) + "}"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("LongRoPE needs 6 short and long factors"), std::string::npos)
      << wrong.status();
  auto zero = Read(dir, PhiConfig(R"(, "max_position_embeddings": 4096, "partial_rotary_factor": 0)"));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("partial_rotary_factor"), std::string::npos) << zero.status();
}

TEST(Phi3ConfigTest, TheFourKModelsWindowBindsEveryLayer) {
  testing::TempDir dir;
  // Phi-3 mini 4k: a 2,047-token window in a 4,096-token context.
  auto c = Read(dir, PhiConfig(R"(, "max_position_embeddings": 4096, "sliding_window": 2047,
      "rope_scaling": null)"));
  ASSERT_TRUE(c.ok()) << c.status();
  for (const LayerAttention& l : c->layers) EXPECT_EQ(l.window, 2047);
  EXPECT_TRUE(c->ropes[0].freq_factors.empty());
  EXPECT_EQ(c->ropes[0].magnitude, 1.0);
}

TEST(Phi3ConfigTest, AnUnsupportedScalingOrActivationIsNamed) {
  testing::TempDir dir;
  auto yarn =
      Read(dir, PhiConfig(R"(, "max_position_embeddings": 4096, "rope_scaling": {"type": "yarn", "factor": 4.0})"));
  ASSERT_FALSE(yarn.ok());
  EXPECT_NE(yarn.status().message().find("rope_scaling type 'yarn' is not supported for Phi-3"), std::string::npos)
      << yarn.status();
  auto gelu = Read(dir, R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256, "max_position_embeddings": 4096,
      "hidden_act": "gelu"})");
  ASSERT_FALSE(gelu.ok());
  EXPECT_NE(gelu.status().message().find("'hidden_act' = 'gelu'"), std::string::npos) << gelu.status();
}

}  // namespace
}  // namespace kvfleet::model
