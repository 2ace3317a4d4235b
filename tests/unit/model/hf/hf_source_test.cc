// The Hugging Face reader on checkpoints written here: a round trip through
// safetensors, sharded and single, and every kind of bad input refused with
// the file, the field and what to do.
#include "model/hf/hf_source.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/hf/safetensors_file.h"
#include "model/model.h"
#include "tests/testing/temp_dir.h"
#include "tools/hf_export/hf_export.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}
std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void ExpectError(const absl::Status& s, absl::StatusCode code, std::initializer_list<std::string> parts) {
  EXPECT_EQ(s.code(), code) << s;
  for (const std::string& p : parts) EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s;
}

std::vector<uint8_t> Floats(std::initializer_list<float> v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), std::data(v), out.size());
  return out;
}

TEST(SafetensorsTest, RoundTripKeepsNamesShapesAndBytes) {
  testing::TempDir dir;
  WriteBytes(dir.Path("a.safetensors"),
             SerializeSafetensors({{.name = "w", .dtype = DType::kF32, .shape = {2, 2}, .data = Floats({1, 2, 3, 4})},
                                   {.name = "b", .dtype = DType::kBF16, .shape = {2}, .data = {0x80, 0x3f, 0, 0x40}}}));
  auto f = SafetensorsFile::Open(dir.Path("a.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->tensors().size(), 2u);
  const TensorView& w = (*f)->tensors()[0];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 2}));
  float v[4];
  std::memcpy(v, w.data, 16);
  EXPECT_EQ(v[3], 4.0f);
  EXPECT_EQ((*f)->tensors()[1].dtype, DType::kBF16);
}

// A forged header: each lie is caught before any tensor is read.
TEST(SafetensorsTest, ForgedHeadersAreRefusedNamingTheProblem) {
  testing::TempDir dir;
  const auto header_file = [&](const std::string& name, const std::string& json, size_t data_bytes) {
    std::string bytes(8, '\0');
    const uint64_t len = json.size();
    std::memcpy(bytes.data(), &len, 8);
    Write(dir.Path(name), bytes + json + std::string(data_bytes, '\0'));
    return SafetensorsFile::Open(dir.Path(name)).status();
  };
  ExpectError(header_file("short.safetensors", "", 0), absl::StatusCode::kInvalidArgument, {"short.safetensors"});
  {
    std::string bytes(8, '\0');
    const uint64_t len = 1000;
    std::memcpy(bytes.data(), &len, 8);
    Write(dir.Path("len.safetensors"), bytes + "{}");
    ExpectError(SafetensorsFile::Open(dir.Path("len.safetensors")).status(), absl::StatusCode::kInvalidArgument,
                {"len.safetensors", "header length 1000 runs past the end"});
  }
  ExpectError(header_file("json.safetensors", "[1,2]", 0), absl::StatusCode::kInvalidArgument, {"not a JSON object"});
  ExpectError(header_file("past.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
              absl::StatusCode::kInvalidArgument, {"tensor 'w'", "spans bytes [0, 16) of a data section of 8"});
  ExpectError(header_file("size.safetensors", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16),
              absl::StatusCode::kInvalidArgument, {"tensor 'w'", "need 12 bytes", "span 16"});
  ExpectError(header_file("overlap.safetensors",
                          R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                          16),
              absl::StatusCode::kInvalidArgument, {"'a' and 'b' overlap"});
  ExpectError(header_file("fp8.safetensors", R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4),
              absl::StatusCode::kUnimplemented, {"tensor 'w'", "F8_E4M3", "F32, F16 and BF16"});
  ExpectError(header_file("int.safetensors", R"({"qweight":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", 4),
              absl::StatusCode::kUnimplemented, {"qweight", "I32", "GPTQ/AWQ"});
}

// A checkpoint of a tiny Qwen2 (two shards, f32), then broken one file at a time.
class HfCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools::WriteTinyModel({.architecture = "qwen2", .seed = 5}, dir_.Path("t.gguf")).ok());
    ckpt_ = dir_.Path("ckpt");
    ASSERT_TRUE(tools::ExportHfCheckpoint(dir_.Path("t.gguf"), ckpt_, {.dtype = DType::kF32, .shards = 2}).ok());
  }
  absl::Status Load() { return Model::Load(ckpt_).status(); }

  testing::TempDir dir_;
  std::string ckpt_;
};

TEST_F(HfCheckpointTest, ShardedCheckpointLoadsWithItsTokenizerAndConfig) {
  auto m = Model::Load(ckpt_);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->config().architecture, "qwen2");
  EXPECT_EQ((*m)->source().format(), ModelFormat::kHuggingFace);
  EXPECT_TRUE((*m)->weights().layers[0].attn_q_bias.present());
  EXPECT_EQ((*m)->vocabulary().model, "gpt2");
  EXPECT_FALSE((*m)->vocabulary().chat_template.empty());
  auto config_only = Model::Load(ckpt_ + "/config.json", {.weights = false, .vocabulary = false});
  ASSERT_TRUE(config_only.ok()) << config_only.status();
  EXPECT_EQ((*config_only)->config().num_layers, (*m)->config().num_layers);
}

TEST_F(HfCheckpointTest, AMissingShardIsNamed) {
  fs::remove(ckpt_ + "/model-00002-of-00002.safetensors");
  ExpectError(Load(), absl::StatusCode::kNotFound,
              {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "missing"});
}

TEST_F(HfCheckpointTest, AnIndexEntryTheShardDoesNotHoldIsNamed) {
  std::string index = Read(ckpt_ + "/model.safetensors.index.json");
  index.replace(index.find("\"weight_map\": {"), 15, "\"weight_map\": {\"model.ghost.weight\": \"model-00001-of-00002.safetensors\",");
  Write(ckpt_ + "/model.safetensors.index.json", index);
  ExpectError(Load(), absl::StatusCode::kInvalidArgument, {"model.ghost.weight", "does not hold it"});
}

TEST_F(HfCheckpointTest, AnUnknownArchitectureIsRefusedWithTheSupportedList) {
  std::string config = Read(ckpt_ + "/config.json");
  config.replace(config.find("Qwen2ForCausalLM"), 16, "FalconForCausalLM");
  Write(ckpt_ + "/config.json", config);
  ExpectError(Load(), absl::StatusCode::kUnimplemented,
              {"config.json 'architectures'", "FalconForCausalLM", "Qwen2ForCausalLM", "Gemma3ForCausalLM"});
}

TEST_F(HfCheckpointTest, AMissingConfigFieldIsNamed) {
  std::string config = Read(ckpt_ + "/config.json");
  config.replace(config.find("\"hidden_size\""), 13, "\"hidden_sise\"");
  Write(ckpt_ + "/config.json", config);
  ExpectError(Load(), absl::StatusCode::kInvalidArgument, {"config.json", "'hidden_size' is missing"});
  Write(ckpt_ + "/config.json", "{\"architectures\": [\"Qwen2ForCausalLM\"], ");
  ExpectError(Load(), absl::StatusCode::kInvalidArgument, {"config.json", "not valid JSON"});
  // A number no double holds: nlohmann's parser throws for it even when told not to (found by fuzzing).
  Write(ckpt_ + "/config.json", "{\"architectures\": [\"Qwen2ForCausalLM\"], \"rope_theta\": 1e400}");
  ExpectError(Load(), absl::StatusCode::kInvalidArgument, {"config.json", "not valid JSON", "number overflow"});
}

TEST_F(HfCheckpointTest, AMissingOrMalformedTokenizerIsNamed) {
  fs::rename(ckpt_ + "/tokenizer.json", ckpt_ + "/tokenizer.bak");
  ExpectError(Load(), absl::StatusCode::kNotFound, {"tokenizer.json", "cannot open"});
  Write(ckpt_ + "/tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}");
  ExpectError(Load(), absl::StatusCode::kUnimplemented, {"tokenizer.json", "model.type WordPiece", "BPE"});
  Write(ckpt_ + "/tokenizer.json", "{\"model\": ");
  ExpectError(Load(), absl::StatusCode::kInvalidArgument, {"tokenizer.json", "not valid JSON"});
  // A field of the wrong type (found by fuzzing).
  Write(ckpt_ + "/tokenizer.json",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"ignore_merges\": \"yes\"}}");
  ExpectError(Load(), absl::StatusCode::kInvalidArgument, {"tokenizer.json", "wrong JSON type"});
  // The config alone still loads (the capacity planner needs nothing else).
  EXPECT_TRUE(Model::Load(ckpt_ + "/config.json", {.weights = false, .vocabulary = false}).ok());
}

TEST_F(HfCheckpointTest, AShapeThatDisagreesWithTheConfigIsNamed) {
  std::string config = Read(ckpt_ + "/config.json");
  config.replace(config.find("\"intermediate_size\": 128"), 24, "\"intermediate_size\": 96");
  Write(ckpt_ + "/config.json", config);
  ExpectError(Load(), absl::StatusCode::kInvalidArgument, {"model.layers.0.mlp.gate_proj.weight", "expected [96, 64]"});
}

TEST(HfPathTest, ADirectoryWithoutAConfigSaysWhatACheckpointHolds) {
  testing::TempDir dir;
  ExpectError(Model::Load(dir.path()).status(), absl::StatusCode::kNotFound, {"no config.json", "tokenizer.json"});
  ExpectError(Model::Load(dir.Path("absent")).status(), absl::StatusCode::kNotFound,
              {"no such file or directory", "checkpoint directory"});
}

}  // namespace
}  // namespace kvfleet::model
