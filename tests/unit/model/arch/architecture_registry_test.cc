// Every architecture of the registry keeps the promises the rest of the
// code relies on, so a folder added under model/arch/ is checked with no
// edit here: its names are its own, its tensor specs name each tensor once
// and fill the core roles once, its config written in either format reads
// back as the same config, and a GGUF block count its tensors cannot hold
// is refused by its own tensor count.
#include "model/arch/architecture_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "model/gguf/gguf_source.h"
#include "model/gguf/gguf_writer.h"
#include "model/model.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_architectures.h"
#include "tools/hf_export/hf_export.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

TEST(ArchitectureRegistryTest, NoFormatNameIsClaimedTwice) {
  std::set<std::string_view> names, gguf, hf;
  for (const Architecture& a : Architectures()) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name;
    EXPECT_FALSE(a.gguf_names.empty()) << a.name;
    EXPECT_FALSE(a.hf_names.empty()) << a.name;
    EXPECT_FALSE(a.hf_model_type.empty()) << a.name;
    for (std::string_view n : a.gguf_names) EXPECT_TRUE(gguf.insert(n).second) << n << " claimed twice";
    for (std::string_view n : a.hf_names) EXPECT_TRUE(hf.insert(n).second) << n << " claimed twice";
    EXPECT_EQ(FindArchitectureByName(a.name), &a);
  }
}

void ExpectSameConfig(const ModelConfig& got, const ModelConfig& want, RopePairing pairing, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.architecture, want.architecture);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.context_length, want.context_length);
  EXPECT_EQ(got.hidden_size, want.hidden_size);
  EXPECT_EQ(got.ffn_size, want.ffn_size);
  EXPECT_EQ(got.num_layers, want.num_layers);
  EXPECT_EQ(got.num_heads, want.num_heads);
  EXPECT_EQ(got.num_kv_heads, want.num_kv_heads);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_FLOAT_EQ(got.rms_norm_eps, want.rms_norm_eps);
  EXPECT_FLOAT_EQ(got.attention_scale, want.attention_scale);
  EXPECT_FLOAT_EQ(got.embedding_scale, want.embedding_scale);
  EXPECT_EQ(got.tied_embeddings, want.tied_embeddings);
  ASSERT_EQ(got.ropes.size(), want.ropes.size());
  for (size_t i = 0; i < got.ropes.size(); ++i) {
    EXPECT_FLOAT_EQ(got.ropes[i].theta, want.ropes[i].theta) << "rope " << i;
    EXPECT_EQ(got.ropes[i].dim, want.ropes[i].dim) << "rope " << i;
    EXPECT_EQ(got.ropes[i].pairing, pairing) << "rope " << i;
    EXPECT_FLOAT_EQ(got.ropes[i].position_scale, want.ropes[i].position_scale) << "rope " << i;
    ASSERT_EQ(got.ropes[i].freq_factors.size(), want.ropes[i].freq_factors.size()) << "rope " << i;
    for (size_t j = 0; j < got.ropes[i].freq_factors.size(); ++j) {
      EXPECT_FLOAT_EQ(got.ropes[i].freq_factors[j], want.ropes[i].freq_factors[j]) << "rope " << i << " pair " << j;
    }
  }
  ASSERT_EQ(got.layers.size(), want.layers.size());
  for (size_t l = 0; l < got.layers.size(); ++l) {
    EXPECT_EQ(got.layers[l].window, want.layers[l].window) << "layer " << l;
    EXPECT_EQ(got.layers[l].rope, want.layers[l].rope) << "layer " << l;
  }
}

class EveryArchitectureTest : public ::testing::TestWithParam<testing::TinyArchitecture> {
 protected:
  const Architecture& arch() const { return *FindArchitectureByName(GetParam().options.architecture); }
};

// Binding (decoder_binding.h) and the exporter find tensors by these names;
// a name twice, or a role filled twice, would bind one tensor over another.
TEST_P(EveryArchitectureTest, SpecsNameEachTensorOnceAndFillEachRoleOnce) {
  std::set<std::string_view> gguf, hf;
  std::vector<LayerRole> roles;  // member pointers have no order
  for (const TensorSpec& t : arch().layer_tensors) {
    EXPECT_TRUE(gguf.insert(t.gguf).second) << t.gguf;
    if (!t.hf.empty()) {
      EXPECT_TRUE(hf.insert(t.hf).second) << t.hf;
    }
    ASSERT_NE(t.parts[0].role, nullptr) << t.gguf << " fills no role";
    for (const TensorPart& p : t.parts) {
      if (p.role == nullptr) continue;
      EXPECT_EQ(std::count(roles.begin(), roles.end(), p.role), 0) << t.gguf << " fills a role already filled";
      roles.push_back(p.role);
    }
    if (!t.fused()) {
      EXPECT_EQ(t.parts[0].rows, t.rows) << t.gguf;
    }
  }
  for (LayerRole core :
       {&LayerWeights::attn_q, &LayerWeights::attn_k, &LayerWeights::attn_v, &LayerWeights::attn_output,
        &LayerWeights::ffn_gate, &LayerWeights::ffn_up, &LayerWeights::ffn_down}) {
    EXPECT_EQ(std::count(roles.begin(), roles.end(), core), 1) << "a core projection has no tensor";
  }
}

// A fused tensor's parts add up to its rows, at any shape.
TEST_P(EveryArchitectureTest, FusedPartsAddUpToTheirTensor) {
  const absl::StatusOr<ModelConfig> c = arch().default_config(GetParam().options.Shape());
  ASSERT_TRUE(c.ok()) << c.status();
  for (const TensorSpec& t : arch().layer_tensors) {
    int64_t rows = 0;
    for (const TensorPart& p : t.parts) rows += p.role != nullptr ? DimSize(p.rows, *c) : 0;
    EXPECT_EQ(rows, DimSize(t.rows, *c)) << t.gguf;
  }
}

// write_config is read_config's inverse: the config at the tiny shape,
// through a GGUF file and through its exported checkpoint.
TEST_P(EveryArchitectureTest, ItsConfigReadsBackFromEitherFormat) {
  testing::TempDir dir;
  const tools::TinyModelOptions& o = GetParam().options;
  DecoderShape shape = o.Shape();
  shape.vocab_size = tools::TinyVocabSize();
  const absl::StatusOr<ModelConfig> want = arch().default_config(shape);
  ASSERT_TRUE(want.ok()) << want.status();

  ASSERT_TRUE(tools::WriteTinyModel(o, dir.Path("t.gguf")).ok());
  auto gguf = OpenModelSource(dir.Path("t.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const absl::StatusOr<ModelConfig> from_gguf = ReadModelConfig(**gguf);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  ExpectSameConfig(*from_gguf, *want, arch().gguf_rope_pairing, "GGUF");

  const nlohmann::json extras = nlohmann::json::parse(tools::TinyHfConfigExtras(o));
  ASSERT_TRUE(tools::ExportHfCheckpoint(dir.Path("t.gguf"), dir.Path("hf"), {.config_extras = extras}).ok());
  auto hf = OpenModelSource(dir.Path("hf"));
  ASSERT_TRUE(hf.ok()) << hf.status();
  const absl::StatusOr<ModelConfig> from_hf = ReadModelConfig(**hf);
  ASSERT_TRUE(from_hf.ok()) << from_hf.status();
  ExpectSameConfig(*from_hf, *want, RopePairing::kHalves, "checkpoint");
}

// A forged block count is refused by the architecture's own tensors per
// layer before anything is sized by it.
TEST_P(EveryArchitectureTest, ABlockCountItsTensorsCannotHoldIsRefused) {
  testing::TempDir dir;
  GgufWriter w;
  ASSERT_TRUE(tools::BuildTinyModel(GetParam().options, w).ok());
  w.SetUint32(std::string(arch().gguf_names[0]) + ".block_count", 100000000);
  ASSERT_TRUE(w.WriteFile(dir.Path("forged.gguf")).ok());
  auto s = GgufSource::Open(dir.Path("forged.gguf"));
  ASSERT_TRUE(s.ok()) << s.status();
  const absl::Status status = ReadModelConfig(**s).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(absl::StrCat("block_count 100000000 needs at least ", arch().layer_tensors.size(),
                                               " tensors per layer")),
            std::string::npos)
      << status;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryArchitectureTest, ::testing::ValuesIn(testing::TinyArchitectures({.seed = 5})),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kvfleet::model
