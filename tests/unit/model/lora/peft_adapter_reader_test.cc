// The PEFT adapter reader on forged adapters for a tiny base model: the
// rank, alpha, rsLoRA scale and targets PEFT would use, the pairs' values
// as stored (float32 or bfloat16), an identity that follows the files, and
// every refusal naming the field or tensor at fault and what to do.
#include "model/lora/peft_adapter_reader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/float16.h"
#include "model/hf/safetensors_file.h"
#include "model/lora/peft_adapter_writer.h"
#include "nlohmann/json.hpp"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_lora.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

// One forged tensor: its name and shape, values i * step.
SafetensorsEntry Tensor(const std::string& name, std::vector<int64_t> shape, float step, DType dtype = DType::kF32) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  SafetensorsEntry e{.name = name, .dtype = dtype, .shape = std::move(shape)};
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i % 97) * step;
    if (dtype == DType::kF32) {
      const uint8_t* b = reinterpret_cast<const uint8_t*>(&v);
      e.data.insert(e.data.end(), b, b + 4);
    } else {
      const uint16_t bits = FloatToBf16(v);
      const uint8_t* b = reinterpret_cast<const uint8_t*>(&bits);
      e.data.insert(e.data.end(), b, b + 2);
    }
  }
  return e;
}

std::string Name(int layer, const std::string& module, char ab) {
  const bool attention = module != "gate_proj" && module != "up_proj" && module != "down_proj";
  return absl::StrCat("base_model.model.model.layers.", layer, attention ? ".self_attn." : ".mlp.", module, ".lora_",
                      std::string(1, ab), ".weight");
}

class PeftAdapterReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.Path("base.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 5}, path).ok());
    absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status();
    base_ = *std::move(m);
    config_ = {{"peft_type", "LORA"},
               {"r", 4},
               {"lora_alpha", 8},
               {"target_modules", {"q_proj", "v_proj"}},
               {"bias", "none"},
               {"use_dora", false},
               {"modules_to_save", nullptr}};
    for (int layer = 0; layer < static_cast<int>(base_->weights().layers.size()); ++layer) {
      for (const char* module : {"q_proj", "v_proj"}) AddPair(layer, module, 4);
    }
  }

  // A and B of `module` in `layer`, shaped for the base and `rank`.
  void AddPair(int layer, const std::string& module, int64_t rank, DType dtype = DType::kF32) {
    const LayerWeights& l = base_->weights().layers[static_cast<size_t>(layer)];
    const WeightView& w = module == "q_proj" ? l.attn_q : module == "v_proj" ? l.attn_v : l.ffn_down;
    tensors_.push_back(Tensor(Name(layer, module, 'A'), {rank, w.cols}, 0.01f, dtype));
    tensors_.push_back(Tensor(Name(layer, module, 'B'), {w.rows, rank}, -0.02f, dtype));
  }

  absl::StatusOr<LoraAdapter> Read(const LoraLimits& limits = {.max_rank = 16}) {
    const std::string dir = dir_.Path(absl::StrCat("adapter-", ++written_));
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/adapter_config.json") << config_.dump();
    const std::vector<uint8_t> bytes = SerializeSafetensors(tensors_, metadata_);
    std::ofstream(dir + "/adapter_model.safetensors", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return ReadPeftAdapter(dir, "sql", *base_, limits);
  }

  std::string Refusal(const LoraLimits& limits = {.max_rank = 16}) {
    absl::StatusOr<LoraAdapter> a = Read(limits);
    EXPECT_FALSE(a.ok()) << "accepted";
    return std::string(a.status().message());
  }

  testing::TempDir dir_;
  std::unique_ptr<Model> base_;
  nlohmann::json config_;
  std::vector<SafetensorsEntry> tensors_;
  std::map<std::string, std::string> metadata_;  // the weights file's safetensors metadata
  int written_ = 0;
};

TEST_F(PeftAdapterReaderTest, ReadsTheRankAlphaScaleAndPairsPeftWouldUse) {
  absl::StatusOr<LoraAdapter> a = Read();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->name, "sql");
  EXPECT_EQ(a->rank, 4);
  EXPECT_DOUBLE_EQ(a->scale, 2.0) << "alpha / r";
  const LayerWeights& l0 = base_->weights().layers[0];
  const LoraPair* q = a->Pair(0, LoraTarget::kAttnQ);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->in, l0.attn_q.cols);
  EXPECT_EQ(q->out, l0.attn_q.rows);
  EXPECT_FLOAT_EQ(q->a[3], 0.03f);
  // B's row 1 in a GGUF Llama's (adjacent-pair) order is the checkpoint's row head_dim / 2.
  const int64_t half = base_->config().head_dim / 2;
  EXPECT_FLOAT_EQ(q->b[5], static_cast<float>((half * 4 + 1) % 97) * -0.02f);
  EXPECT_FLOAT_EQ(a->Pair(0, LoraTarget::kAttnV)->b[5], -0.10f) << "v keeps the checkpoint's order";
  EXPECT_EQ(a->Pair(0, LoraTarget::kAttnK), nullptr) << "not a target";
  EXPECT_NE(a->Pair(static_cast<int64_t>(a->layers.size()) - 1, LoraTarget::kAttnV), nullptr);
  EXPECT_GT(a->parameters(), 0);
  EXPECT_EQ(a->digest.size(), 64u);

  config_["use_rslora"] = true;
  EXPECT_DOUBLE_EQ(Read()->scale, 4.0) << "alpha / sqrt(r)";
}

TEST_F(PeftAdapterReaderTest, Bfloat16PairsAreReadAsStored) {
  tensors_.clear();
  AddPair(0, "down_proj", 4, DType::kBF16);
  config_["target_modules"] = "all-linear";
  absl::StatusOr<LoraAdapter> a = Read();
  ASSERT_TRUE(a.ok()) << a.status();
  const LoraPair* d = a->Pair(0, LoraTarget::kFfnDown);
  ASSERT_NE(d, nullptr);
  EXPECT_FLOAT_EQ(d->a[3], Bf16ToFloat(FloatToBf16(0.03f)));
  EXPECT_EQ(a->Pair(1, LoraTarget::kFfnDown), nullptr);
}

TEST_F(PeftAdapterReaderTest, TheIdentityFollowsTheFiles) {
  const std::string first = Read()->digest;
  EXPECT_EQ(Read()->digest, first) << "the same files, the same identity";
  tensors_[0].data[0] ^= 1;
  EXPECT_NE(Read()->digest, first) << "the same name with other weights never shares KV with the old";
}

TEST_F(PeftAdapterReaderTest, EveryRefusalNamesWhatIsWrong) {
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&, std::vector<SafetensorsEntry>&)> change;
    const char* says;
    LoraLimits limits{.max_rank = 16};
  };
  const std::vector<Case> cases = {
      {"another PEFT type", [](auto& c, auto&) { c["peft_type"] = "PREFIX_TUNING"; }, "peft_type is PREFIX_TUNING"},
      {"DoRA", [](auto& c, auto&) { c["use_dora"] = true; }, "use_dora is true"},
      {"modules_to_save", [](auto& c, auto&) { c["modules_to_save"] = {"lm_head"}; }, "modules_to_save is set"},
      {"bias terms", [](auto& c, auto&) { c["bias"] = "lora_only"; }, "bias is \"lora_only\""},
      {"a rank pattern",
       [](auto& c, auto&) {
         c["rank_pattern"] = {{"q_proj", 8}};
       },
       "rank_pattern is set"},
      {"a rank over the limit", [](auto& c, auto&) {}, "over --max-lora-rank 2", {.max_rank = 2}},
      {"no rank", [](auto& c, auto&) { c.erase("r"); }, "r (the rank) is missing"},
      {"a module the base lacks", [](auto& c, auto&) { c["target_modules"] = {"c_attn"}; },
       "target_modules names c_attn, which matches no projection"},
      {"a head target",
       [](auto& c, auto&) {
         c["target_modules"] = {"q_proj", "lm_head"};
       },
       "embedding and head adapters are not served"},
      {"a regex matching nothing", [](auto& c, auto&) { c["target_modules"] = ".*\\.attn\\.c_proj"; },
       "matches no projection of the base model"},
      {"a base of other weights",
       [](auto& c, auto&) { c["kvfleet_base_fingerprint"] = std::string(64, 'b'); },
       "fingerprint bbbbbbbbbbbb",
       {.max_rank = 16, .base_fingerprint = std::string(64, 'a')}},
      {"an A of the wrong shape",
       [](auto&, auto& t) {
         t[0] = Tensor(t[0].name, {t[0].shape[0], t[0].shape[1] + 1}, 0.01f);
       },
       "needs ["},
      {"an A without its B", [](auto&, auto& t) { t.erase(t.begin() + 1); }, "has lora_A without its lora_B"},
      {"a layer the base lacks",
       [](auto&, auto& t) {
         t.push_back(Tensor(Name(99, "q_proj", 'A'), {4, 4}, 1));
       },
       "adapts layer 99"},
      {"an embedding adapter",
       [](auto&, auto& t) {
         t.push_back(Tensor("base_model.model.model.embed_tokens.lora_embedding_A", {4, 4}, 1));
       },
       "adapts the embeddings or the head"},
      {"a tensor that is no LoRA pair",
       [](auto&, auto& t) { t.push_back(Tensor("base_model.model.model.norm.weight", {4}, 1)); },
       "is not a LoRA A or B"},
  };
  const nlohmann::json config = config_;
  const std::vector<SafetensorsEntry> tensors = tensors_;
  for (const Case& c : cases) {
    config_ = config;
    tensors_ = tensors;
    c.change(config_, tensors_);
    const std::string message = Refusal(c.limits);
    EXPECT_NE(message.find(c.says), std::string::npos) << c.what << ": " << message;
    EXPECT_NE(message.find("LoRA adapter "), std::string::npos) << c.what << ": names the adapter: " << message;
  }
}

TEST_F(PeftAdapterReaderTest, MissingAndCorruptFilesAreRefusedNamingTheFile) {
  const std::string dir = dir_.Path("empty");
  std::filesystem::create_directories(dir);
  absl::StatusOr<LoraAdapter> none = ReadPeftAdapter(dir, "x", *base_, {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("adapter_config.json"), absl::string_view::npos) << none.status();

  std::ofstream(dir + "/adapter_config.json") << "{\"r\": 4,";
  EXPECT_EQ(ReadPeftAdapter(dir, "x", *base_, {}).status().code(), absl::StatusCode::kInvalidArgument);

  std::ofstream(dir + "/adapter_config.json") << config_.dump();
  std::ofstream(dir + "/adapter_model.safetensors") << "not a safetensors file";
  const absl::Status corrupt = ReadPeftAdapter(dir, "x", *base_, {}).status();
  EXPECT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.message().find("adapter_model.safetensors"), absl::string_view::npos) << corrupt;
}

TEST_F(PeftAdapterReaderTest, TheBaseFingerprintInTheWeightsMetadataIsChecked) {
  // Where kvfleet's tools record it: PEFT refuses unknown config keys, and ignores metadata.
  metadata_["kvfleet_base_fingerprint"] = std::string(64, 'b');
  const std::string refusal = Refusal({.max_rank = 16, .base_fingerprint = std::string(64, 'a')});
  EXPECT_NE(refusal.find("fingerprint bbbbbbbbbbbb"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("kvfleet_base_fingerprint"), std::string::npos) << refusal;
  metadata_["kvfleet_base_fingerprint"] = std::string(64, 'a');
  EXPECT_TRUE(Read({.max_rank = 16, .base_fingerprint = std::string(64, 'a')}).ok());
  EXPECT_TRUE(Read({.max_rank = 16}).ok()) << "a reader that knows no base checks nothing";
}

TEST_F(PeftAdapterReaderTest, WrittenAndReadBackAnAdapterIsTheSameOnAGgufLlamasPermutedRows) {
  // The tiny GGUF Llama pairs adjacent values (its q and k rows permuted):
  // the writer puts B's rows back in the checkpoint's order, the reader
  // permutes them again, and the round trip changes nothing.
  ASSERT_EQ(base_->config().ropes.front().pairing, RopePairing::kAdjacent);
  LoraAdapter a = tools::RandomLoraAdapter(*base_, {.name = "rt", .rank = 2, .seed = 9});
  const std::string dir = dir_.Path("round-trip");
  ASSERT_TRUE(WritePeftAdapter(a, dir, {}, &base_->config()).ok());
  absl::StatusOr<LoraAdapter> back = ReadPeftAdapter(dir, "rt", *base_, {.max_rank = 16});
  ASSERT_TRUE(back.ok()) << back.status();
  for (size_t l = 0; l < a.layers.size(); ++l) {
    for (int t = 0; t < kLoraTargets; ++t) {
      const LoraPair* want = a.Pair(static_cast<int64_t>(l), static_cast<LoraTarget>(t));
      const LoraPair* got = back->Pair(static_cast<int64_t>(l), static_cast<LoraTarget>(t));
      ASSERT_NE(got, nullptr);
      EXPECT_EQ(got->a, want->a) << l << " " << t;
      EXPECT_EQ(got->b, want->b) << l << " " << t;
    }
  }
  // Written as held, q's B rows would come back permuted.
  ASSERT_TRUE(WritePeftAdapter(a, dir).ok());
  back = ReadPeftAdapter(dir, "rt", *base_, {.max_rank = 16});
  ASSERT_TRUE(back.ok());
  EXPECT_NE(back->Pair(0, LoraTarget::kAttnQ)->b, a.Pair(0, LoraTarget::kAttnQ)->b);
  EXPECT_EQ(back->Pair(0, LoraTarget::kAttnV)->b, a.Pair(0, LoraTarget::kAttnV)->b) << "v is not permuted";
}

}  // namespace
}  // namespace kvfleet::model
