#include "model/gguf/gguf_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/kv_sizing.h"
#include "model/gguf/gguf_writer.h"
#include "model/model.h"
#include "tests/testing/default_model.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

TEST(GgufFileTest, RoundTripsMetadataOfEveryTypeAndTensors) {
  testing::TempDir dir;
  GgufWriter w;
  w.SetString("s", "hello");
  w.SetUint32("u", 7);
  w.SetInt32("i", -3);
  w.SetFloat32("f", 0.5f);
  w.SetBool("b", true);
  w.SetStringArray("sa", {"a", "bc", ""});
  w.SetInt32Array("ia", {1, -2, 3});
  w.SetFloat32Array("fa", {1.5f, -2.0f});
  std::vector<uint8_t> data(4 * 32);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  w.AddTensor("t0", {32}, DType::kF32, data);
  w.AddTensor("t1", {32, 2}, DType::kF16, data);
  ASSERT_TRUE(w.WriteFile(dir.Path("x.gguf")).ok());

  auto file = GgufFile::Open(dir.Path("x.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.GetString("s"), "hello");
  EXPECT_EQ(*f.GetInt("u"), 7);
  EXPECT_EQ(*f.GetInt("i"), -3);
  EXPECT_EQ(*f.GetFloat("f"), 0.5);
  EXPECT_EQ(*f.GetFloat("u"), 7.0);  // integers read as numbers too
  EXPECT_TRUE(*f.GetBool("b"));
  EXPECT_EQ(*f.GetStringArray("sa"), (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ(*f.GetIntArray("ia"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*f.GetFloatArray("fa"), (std::vector<float>{1.5f, -2.0f}));
  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorInfo* t1 = f.FindTensor("t1");
  ASSERT_NE(t1, nullptr);
  EXPECT_EQ(t1->shape, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(t1->dtype, DType::kF16);
  EXPECT_EQ(t1->num_bytes, 128);
  EXPECT_EQ(std::memcmp(t1->data, data.data(), 128), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t1->data) % 32, 0u);
  EXPECT_EQ(f.FindTensor("nope"), nullptr);
}

// Copying a file's metadata with SetValue and its tensors with AddTensorView
// reproduces it byte for byte.
TEST(GgufFileTest, SetValueAndTensorViewsCopyAFileExactly) {
  testing::TempDir dir;
  GgufWriter w;
  // In key order, as GgufFile's metadata map hands them back.
  w.SetValue("a64", {.type = GgufType::kArray, .element_type = GgufType::kInt64,
                     .array = {int64_t{1}, int64_t{-1}}});
  w.SetValue("ab", {.type = GgufType::kArray, .element_type = GgufType::kBool, .array = {true, false}});
  w.SetValue("b", {.type = GgufType::kBool, .scalar = true});
  w.SetValue("f32", {.type = GgufType::kFloat32, .scalar = 0.25});
  w.SetValue("f64", {.type = GgufType::kFloat64, .scalar = 1e-300});
  w.SetValue("i16", {.type = GgufType::kInt16, .scalar = int64_t{-2}});
  w.SetValue("i32", {.type = GgufType::kInt32, .scalar = int64_t{-7}});
  w.SetValue("i64", {.type = GgufType::kInt64, .scalar = -(int64_t{1} << 50)});
  w.SetValue("i8", {.type = GgufType::kInt8, .scalar = int64_t{-128}});
  w.SetValue("s", {.type = GgufType::kString, .scalar = std::string("x")});
  w.SetValue("u16", {.type = GgufType::kUint16, .scalar = uint64_t{65535}});
  w.SetValue("u32", {.type = GgufType::kUint32, .scalar = uint64_t{4000000000}});
  w.SetValue("u64", {.type = GgufType::kUint64, .scalar = ~uint64_t{0}});
  w.SetValue("u8", {.type = GgufType::kUint8, .scalar = uint64_t{255}});
  std::vector<uint8_t> data(4 * 33);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  w.AddTensor("t0", {33}, DType::kF32, data);
  w.AddTensor("t1", {32, 2}, DType::kF16, std::vector<uint8_t>(data.begin(), data.begin() + 128));
  ASSERT_TRUE(w.WriteFile(dir.Path("a.gguf")).ok());
  auto a = GgufFile::Open(dir.Path("a.gguf"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*(*a)->GetInt("u32"), 4000000000);
  EXPECT_EQ(*(*a)->GetInt("i64"), -(int64_t{1} << 50));

  GgufWriter copy;
  for (const auto& [key, value] : (*a)->metadata()) copy.SetValue(key, value);
  for (const TensorInfo& t : (*a)->tensors()) {
    copy.AddTensorView(t.name, t.shape, t.dtype, std::span<const uint8_t>(t.data, t.num_bytes));
  }
  ASSERT_TRUE(copy.WriteFile(dir.Path("b.gguf")).ok());
  auto bytes = [&dir](const std::string& name) {
    std::ifstream in(dir.Path(name), std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes("a.gguf"), bytes("b.gguf"));
  const std::vector<uint8_t> serialized = w.Serialize();
  EXPECT_EQ(bytes("a.gguf"), std::vector<char>(serialized.begin(), serialized.end()));

  auto b = GgufFile::Open(dir.Path("b.gguf"));
  ASSERT_TRUE(b.ok()) << b.status();
  for (const auto& [key, value] : (*a)->metadata()) {
    const GgufValue& other = (*b)->metadata().at(key);
    EXPECT_TRUE(value.type == other.type && value.element_type == other.element_type &&
                value.scalar == other.scalar && value.array == other.array)
        << key;
  }
}

TEST(GgufFileTest, TypedGettersNameTheKeyOnMismatch) {
  testing::TempDir dir;
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  ASSERT_TRUE(w.WriteFile(dir.Path("x.gguf")).ok());
  auto f = GgufFile::Open(dir.Path("x.gguf"));
  ASSERT_TRUE(f.ok());
  auto i = (*f)->GetInt("general.architecture");
  EXPECT_EQ(i.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(i.status().message().find("general.architecture"), std::string::npos);
  auto missing = (*f)->GetString("llama.block_count");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("llama.block_count"), std::string::npos);
}

TEST(GgufFileTest, TinyModelOfEveryTypeLoads) {
  testing::TempDir dir;
  for (DType t : kAllDTypes) {
    const tools::TinyModelOptions o = tools::ShapedForType({.dtype = t, .seed = 3});
    const std::string path = dir.Path(std::string(DTypeName(t)) + ".gguf");
    ASSERT_TRUE(tools::WriteTinyModel(o, path).ok());
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << DTypeName(t) << ": " << m.status();
    const ModelConfig& hp = (*m)->config();
    EXPECT_EQ(hp.num_layers, o.num_layers);
    EXPECT_EQ(hp.num_kv_heads, o.num_kv_heads);
    EXPECT_EQ(hp.head_dim, o.hidden_size / o.num_heads);
    EXPECT_EQ(hp.vocab_size, tools::TinyVocabSize());
    EXPECT_FALSE(hp.tied_embeddings);
    EXPECT_EQ((*m)->weights().layers[1].ffn_down.dtype, t);
  }
}

TEST(GgufFileTest, DefaultModelHyperparametersAndKvCost) {
  const std::string path = kvfleet::testing::kDefaultModelPath;
  if (!kvfleet::testing::DefaultModelFetched()) GTEST_SKIP() << kvfleet::testing::kDefaultModelMissing;
  auto m = Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& hp = (*m)->config();
  EXPECT_EQ(hp.architecture, "llama");
  EXPECT_EQ(hp.num_layers, 30);
  EXPECT_EQ(hp.num_heads, 9);
  EXPECT_EQ(hp.num_kv_heads, 3);
  EXPECT_EQ(hp.head_dim, 64);
  EXPECT_EQ(hp.hidden_size, 576);
  EXPECT_EQ(hp.ffn_size, 1536);
  EXPECT_EQ(hp.vocab_size, 49152);
  EXPECT_EQ(hp.context_length, 8192);
  ASSERT_EQ(hp.ropes.size(), 1u);
  EXPECT_DOUBLE_EQ(hp.ropes[0].theta, 100000.0);
  EXPECT_EQ(hp.ropes[0].pairing, RopePairing::kAdjacent);
  EXPECT_EQ(hp.max_window(), 0);
  EXPECT_TRUE(hp.tied_embeddings);
  EXPECT_EQ(KvBytesPerToken(hp.kv_shape(), 2), 23040);
  EXPECT_EQ((*m)->weights().token_embd.dtype, DType::kQ8_0);
  EXPECT_EQ((*m)->weights().layers[0].attn_q.dtype, DType::kQ4_1);
}

}  // namespace
}  // namespace kvfleet::model
