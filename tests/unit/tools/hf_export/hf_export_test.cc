// The same model through both formats: a tiny GGUF of each architecture
// of the registry, exported as a float32 checkpoint, gives the same logits
// and the same tokens. Where GGUF keeps a checkpoint's RoPE pairing
// (Architecture::gguf_rope_pairing is kHalves) the weights are laid out
// alike, so the bits are identical; Llama's GGUF permutes Wq/Wk rows for
// adjacent pairs, so its attention sums in another order (within 1e-5 of
// the largest logit). A bfloat16 checkpoint rounds the weights: close, not
// equal.
#include "tools/hf_export/hf_export.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "engine/executor/cpu/cpu_executor.h"
#include "model/arch/architecture_registry.h"
#include "model/model.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_architectures.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::tools {
namespace {

std::vector<float> Logits(const model::Model& m, const std::vector<model::TokenId>& prompt) {
  auto ex = engine::CpuExecutor::Create(
      m, {.num_blocks = 16, .block_size = 4, .num_threads = 2, .free_window_blocks = false});  // one table, by hand
  EXPECT_TRUE(ex.ok()) << ex.status();
  std::vector<BlockId> table;
  for (int32_t i = 0; i < 16; ++i) table.emplace_back(i);
  engine::ForwardBatchBuilder builder(4);
  builder.AddChunk(prompt, 0, table, engine::LogitsWanted::kAll);
  auto out = (*ex)->Forward(builder.Finish());
  EXPECT_TRUE(out.ok()) << out.status();
  return std::vector<float>(out->logits, out->logits + out->num_rows * out->vocab_size);
}

// Each architecture with its own output head and with the embeddings tied.
class HfExportTest : public ::testing::TestWithParam<std::tuple<testing::TinyArchitecture, bool>> {};

TEST_P(HfExportTest, TheCheckpointIsTheSameModel) {
  testing::TempDir dir;
  TinyModelOptions o = std::get<0>(GetParam()).options;
  o.tied_embeddings = std::get<1>(GetParam());
  ASSERT_TRUE(WriteTinyModel(o, dir.Path("t.gguf")).ok());
  const nlohmann::json extras = nlohmann::json::parse(TinyHfConfigExtras(o));
  ASSERT_TRUE(ExportHfCheckpoint(dir.Path("t.gguf"), dir.Path("f32"), {.dtype = DType::kF32, .shards = 2,
                                                                         .config_extras = extras})
                  .ok());
  ASSERT_TRUE(ExportHfCheckpoint(dir.Path("t.gguf"), dir.Path("bf16"), {.dtype = DType::kBF16, .shards = 1,
                                                                          .config_extras = extras})
                  .ok());
  auto gguf = model::Model::Load(dir.Path("t.gguf"));
  auto f32 = model::Model::Load(dir.Path("f32"));
  auto bf16 = model::Model::Load(dir.Path("bf16"));
  ASSERT_TRUE(gguf.ok() && f32.ok() && bf16.ok()) << gguf.status() << f32.status() << bf16.status();

  // The tokenizer from tokenizer.json is the GGUF's.
  auto tok_gguf = model::CreateTokenizer((*gguf)->vocabulary());
  auto tok_hf = model::CreateTokenizer((*f32)->vocabulary());
  ASSERT_TRUE(tok_gguf.ok() && tok_hf.ok()) << tok_hf.status();
  for (const char* text : {"Hello, world! 12345", "<|im_start|>user\nhi there<|im_end|>", "  two  spaces\n\nand"}) {
    for (bool special : {false, true}) {
      EXPECT_EQ(*(*tok_hf)->Encode(text, {.parse_special = special}),
                *(*tok_gguf)->Encode(text, {.parse_special = special}))
          << text;
    }
  }

  // 20 tokens: past Gemma's window of 8.
  std::vector<model::TokenId> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(static_cast<model::TokenId>((i * 37 + 11) % 250));
  const std::vector<float> a = Logits(**gguf, prompt), b = Logits(**f32, prompt), c = Logits(**bf16, prompt);
  ASSERT_EQ(a.size(), b.size());
  float largest = 0, diff = 0, diff_bf16 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::abs(a[i]));
    diff = std::max(diff, std::abs(a[i] - b[i]));
    diff_bf16 = std::max(diff_bf16, std::abs(a[i] - c[i]));
  }
  if (model::FindArchitectureByName(o.architecture)->gguf_rope_pairing == model::RopePairing::kHalves) {
    EXPECT_EQ(a, b) << "float32 checkpoint of " << o.architecture;
  } else {
    EXPECT_LE(diff, 1e-5f * largest) << o.architecture;
  }
  EXPECT_GT(diff_bf16, 0.0f) << "bfloat16 rounds the weights";
  EXPECT_LE(diff_bf16, 0.05f * largest) << o.architecture;
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfExportTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TinyArchitectures({.seed = 3})),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_tied" : "");
                         });

TEST(HfExportOptionsTest, BadOptionsAreRefused) {
  EXPECT_FALSE((HfExportOptions{.dtype = DType::kQ4_0}).Validate().ok());
  EXPECT_FALSE((HfExportOptions{.shards = 0}).Validate().ok());
  testing::TempDir dir;
  ASSERT_TRUE(WriteTinyModel({.llama3_rope = true}, dir.Path("t.gguf")).ok());
  const absl::Status s = ExportHfCheckpoint(dir.Path("t.gguf"), dir.Path("out"), {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("rope_scaling"), std::string::npos) << s;
}

}  // namespace
}  // namespace kvfleet::tools
