// MakeDraftModel against tiny targets: a full copy is the target (metadata,
// tensors and logits); a cut keeps only the first blocks; requantizing
// changes the matrices and nothing else; bad input fails with a clear status
// and leaves no file behind.
#include "tools/draft_model/make_draft.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "kernels/cpu/quantize.h"
#include "model/gguf/gguf_writer.h"
#include "model/gguf/gguf_source.h"
#include "model/model.h"
#include "engine/executor/executor_factory.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::tools {
namespace {

using model::GgufType;
using model::GgufValue;
using model::Model;
using model::TensorInfo;

std::unique_ptr<Model> Load(const std::string& path) {
  auto m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// The GGUF file under a model a draft was cut from (or cut into).
const model::GgufFile& File(const std::unique_ptr<Model>& m) {
  return dynamic_cast<const model::GgufSource&>(m->source()).file();
}

// Metadata of types the tiny model does not write, as real conversions do.
void AddExtraMetadata(model::GgufWriter& w) {
  w.SetValue("x.u8", {.type = GgufType::kUint8, .scalar = uint64_t{200}});
  w.SetValue("x.i16", {.type = GgufType::kInt16, .scalar = int64_t{-300}});
  w.SetValue("x.u64", {.type = GgufType::kUint64, .scalar = uint64_t{1} << 40});
  w.SetValue("x.i64", {.type = GgufType::kInt64, .scalar = int64_t{-5}});
  w.SetValue("x.f64", {.type = GgufType::kFloat64, .scalar = 0.125});
  w.SetValue("x.u16s",
             {.type = GgufType::kArray, .element_type = GgufType::kUint16, .array = {uint64_t{1}, uint64_t{65535}}});
  w.SetUint32("general.file_type", 0);  // all F32
}

std::string WriteTarget(const testing::TempDir& dir, const TinyModelOptions& o, const std::string& name) {
  model::GgufWriter w;
  EXPECT_TRUE(BuildTinyModel(o, w).ok());
  AddExtraMetadata(w);
  // A per-layer hyperparameter, as some conversions write them.
  w.SetInt32Array("llama.test_per_layer", std::vector<int32_t>(o.num_layers, 7));
  const std::string path = dir.Path(name);
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

bool SameValue(const GgufValue& a, const GgufValue& b) {
  return a.type == b.type && a.element_type == b.element_type && a.scalar == b.scalar && a.array == b.array;
}

bool SameBytes(const TensorInfo& a, const TensorInfo& b) {
  return a.num_bytes == b.num_bytes && std::memcmp(a.data, b.data, a.num_bytes) == 0;
}

std::vector<std::string> DirEntries(const testing::TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Next-token logits of every position of a fixed prompt.
std::vector<float> PromptLogits(const Model& m) {
  auto ex = engine::CreateExecutor(m, {.num_blocks = 4, .block_size = 16, .num_threads = 1});
  EXPECT_TRUE(ex.ok()) << ex.status();
  if (!ex.ok()) return {};
  const std::vector<model::TokenId> tokens = {1, 40, 7, 200, 33, 12};
  const std::vector<BlockId> table = {BlockId(0)};
  engine::ForwardBatchBuilder batch(16);
  batch.AddChunk(tokens, 0, table, engine::LogitsWanted::kAll);
  auto out = (*ex)->Forward(batch.Finish());
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return {out->logits, out->logits + out->num_rows * out->vocab_size};
}

TEST(MakeDraftTest, KeepingEverythingCopiesTheTarget) {
  testing::TempDir dir;
  const std::string target_path = WriteTarget(dir, {.dtype = DType::kQ8_0, .seed = 3}, "target.gguf");
  const std::string draft_path = dir.Path("draft.gguf");
  ASSERT_TRUE(MakeDraftModel(target_path, draft_path, {}).ok());

  auto target = Load(target_path);
  auto draft = Load(draft_path);
  ASSERT_TRUE(target && draft);
  const auto& tm = File(target).metadata();
  const auto& dm = File(draft).metadata();
  ASSERT_EQ(tm.size(), dm.size());
  for (const auto& [key, value] : tm) {
    ASSERT_EQ(dm.count(key), 1u) << key;
    if (key == "general.name") continue;
    EXPECT_TRUE(SameValue(value, dm.at(key))) << key;
  }
  EXPECT_EQ(draft->config().name, target->config().name + " draft (2 layers)");

  const auto& tt = File(target).tensors();
  const auto& dt = File(draft).tensors();
  ASSERT_EQ(tt.size(), dt.size());
  for (size_t i = 0; i < tt.size(); ++i) {
    EXPECT_EQ(tt[i].name, dt[i].name);
    EXPECT_EQ(tt[i].shape, dt[i].shape) << tt[i].name;
    EXPECT_EQ(tt[i].dtype, dt[i].dtype) << tt[i].name;
    EXPECT_TRUE(SameBytes(tt[i], dt[i])) << tt[i].name;
  }
  EXPECT_EQ(PromptLogits(*target), PromptLogits(*draft));
}

TEST(MakeDraftTest, KeepsOnlyTheFirstBlocks) {
  testing::TempDir dir;
  const std::string target_path =
      WriteTarget(dir, {.seed = 5, .num_layers = 3, .tied_embeddings = true}, "target.gguf");
  const std::string draft_path = dir.Path("draft.gguf");
  ASSERT_TRUE(MakeDraftModel(target_path, draft_path, {.keep_layers = 1}).ok());

  auto target = Load(target_path);
  auto draft = Load(draft_path);
  ASSERT_TRUE(target && draft);
  EXPECT_EQ(draft->config().num_layers, 1);
  EXPECT_EQ(*File(draft).GetInt("llama.block_count"), 1);
  EXPECT_EQ(File(draft).metadata().at("llama.block_count").type, GgufType::kUint32);
  EXPECT_EQ(draft->config().name, target->config().name + " draft (1 layer)");
  EXPECT_EQ(*File(draft).GetIntArray("llama.test_per_layer"), std::vector<int64_t>{7});
  EXPECT_TRUE(draft->config().tied_embeddings);
  EXPECT_EQ(draft->weights().layers.size(), 1u);

  std::set<std::string> names;
  for (const TensorInfo& t : File(draft).tensors()) {
    names.insert(t.name);
    EXPECT_FALSE(absl::StartsWith(t.name, "blk.1.") || absl::StartsWith(t.name, "blk.2.")) << t.name;
    const TensorInfo* same = File(target).FindTensor(t.name);
    ASSERT_NE(same, nullptr) << t.name;
    EXPECT_TRUE(SameBytes(*same, t)) << t.name;
  }
  size_t expected = 0;
  for (const TensorInfo& t : File(target).tensors()) {
    if (!absl::StartsWith(t.name, "blk.") || absl::StartsWith(t.name, "blk.0.")) ++expected;
  }
  EXPECT_EQ(names.size(), expected);
  EXPECT_EQ(names.count("token_embd.weight"), 1u);
  EXPECT_EQ(names.count("output_norm.weight"), 1u);
  EXPECT_EQ(names.count("blk.0.ffn_down.weight"), 1u);
  EXPECT_EQ(PromptLogits(*draft).size(), 6u * static_cast<size_t>(draft->config().vocab_size));
}

class MakeDraftRequantTest : public ::testing::TestWithParam<DType> {};

TEST_P(MakeDraftRequantTest, ConvertsMatricesAndKeepsNorms) {
  const DType to = GetParam();
  testing::TempDir dir;
  TinyModelOptions o = tools::ShapedForType({.dtype = to, .seed = 9});
  o.dtype = DType::kF32;  // a float32 target, of a shape whose rows the type can hold
  const std::string target_path = WriteTarget(dir, o, "target.gguf");
  const std::string draft_path = dir.Path("draft.gguf");
  ASSERT_TRUE(MakeDraftModel(target_path, draft_path, {.keep_layers = 1, .weight_type = to}).ok());

  auto target = Load(target_path);
  auto draft = Load(draft_path);
  ASSERT_TRUE(target && draft);
  EXPECT_EQ(draft->config().name, absl::StrCat(target->config().name, " draft (1 layer, ", DTypeName(to), ")"));
  // llama.cpp's llama_ftype codes.
  const std::map<DType, int64_t> file_types = {{DType::kF32, 0},  {DType::kF16, 1},  {DType::kQ4_0, 2},
                                               {DType::kQ4_1, 3}, {DType::kQ8_0, 7}, {DType::kBF16, 32},
                                               {DType::kQ5_0, 8}, {DType::kQ5_1, 9}, {DType::kQ2_K, 10},
                                               {DType::kQ3_K, 11}, {DType::kQ4_K, 14}, {DType::kQ5_K, 16},
                                               {DType::kQ6_K, 18}};
  EXPECT_EQ(*File(draft).GetInt("general.file_type"), file_types.at(to));
  for (const TensorInfo& t : File(draft).tensors()) {
    const TensorInfo& src = *File(target).FindTensor(t.name);
    EXPECT_EQ(t.shape, src.shape) << t.name;
    if (t.shape.size() == 1) {
      EXPECT_EQ(t.dtype, DType::kF32) << t.name;
      EXPECT_TRUE(SameBytes(src, t)) << t.name;
      continue;
    }
    ASSERT_EQ(t.dtype, to) << t.name;
    // Each row is the target's row quantized once (from exact F32 values).
    const int64_t cols = t.shape[0];
    std::vector<float> want(cols), got(cols);
    std::vector<uint8_t> quant(RowBytes(to, cols));
    const auto* src_rows = reinterpret_cast<const float*>(src.data);
    for (int64_t r = 0; r < t.shape[1]; ++r) {
      kernels::QuantizeRow(to, src_rows + r * cols, quant.data(), cols);
      kernels::DequantizeRow(to, quant.data(), want.data(), cols);
      kernels::DequantizeRow(to, t.data + r * RowBytes(to, cols), got.data(), cols);
      ASSERT_EQ(want, got) << t.name << " row " << r;
    }
  }
  for (float x : PromptLogits(*draft)) ASSERT_TRUE(std::isfinite(x));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MakeDraftRequantTest, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(MakeDraftTest, TooManyOrNegativeLayersFailAndWriteNothing) {
  testing::TempDir dir;
  const std::string target_path = WriteTarget(dir, {.seed = 1}, "target.gguf");
  const std::string draft_path = dir.Path("draft.gguf");

  absl::Status s = MakeDraftModel(target_path, draft_path, {.keep_layers = 3});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "cannot keep 3 layers: the model has 2")) << s;

  s = MakeDraftModel(target_path, draft_path, {.keep_layers = -1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "keep_layers must be >= 0")) << s;
  EXPECT_EQ(DirEntries(dir), std::vector<std::string>{"target.gguf"});
}

TEST(MakeDraftTest, MissingOrCorruptTargetFailsAndWritesNothing) {
  testing::TempDir dir;
  const std::string draft_path = dir.Path("draft.gguf");
  absl::Status s = MakeDraftModel(dir.Path("absent.gguf"), draft_path, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "absent.gguf")) << s;

  // A valid file cut short in its tensor data.
  const std::string target_path = WriteTarget(dir, {.seed = 1}, "target.gguf");
  const auto size = std::filesystem::file_size(target_path);
  std::filesystem::resize_file(target_path, size / 2);
  s = MakeDraftModel(target_path, draft_path, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "truncated")) << s;

  std::ofstream(dir.Path("junk.gguf")) << "not a model at all";
  s = MakeDraftModel(dir.Path("junk.gguf"), draft_path, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "not a GGUF file")) << s;
  EXPECT_EQ(DirEntries(dir), (std::vector<std::string>{"junk.gguf", "target.gguf"}));
}

TEST(MakeDraftTest, FailureLeavesAnExistingOutputUntouched) {
  testing::TempDir dir;
  const std::string target_path = WriteTarget(dir, {.seed = 1}, "target.gguf");
  const std::string draft_path = dir.Path("draft.gguf");
  std::ofstream(draft_path) << "previous draft";
  EXPECT_FALSE(MakeDraftModel(target_path, draft_path, {.keep_layers = 9}).ok());
  std::ifstream in(draft_path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "previous draft");
  EXPECT_EQ(DirEntries(dir), (std::vector<std::string>{"draft.gguf", "target.gguf"}));

  // A successful run replaces it.
  ASSERT_TRUE(MakeDraftModel(target_path, draft_path, {.keep_layers = 1}).ok());
  EXPECT_EQ(Load(draft_path)->config().num_layers, 1);
  EXPECT_EQ(DirEntries(dir), (std::vector<std::string>{"draft.gguf", "target.gguf"}));
}

TEST(MakeDraftTest, RefusesToOverwriteTheTargetOrWriteIntoAMissingDirectory) {
  testing::TempDir dir;
  const std::string target_path = WriteTarget(dir, {.seed = 1}, "target.gguf");
  const auto size = std::filesystem::file_size(target_path);
  absl::Status s = MakeDraftModel(target_path, target_path, {.keep_layers = 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "is the target model itself")) << s;
  EXPECT_EQ(std::filesystem::file_size(target_path), size);

  s = MakeDraftModel(target_path, dir.Path("no/such/dir/draft.gguf"), {});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "no/such/dir/draft.gguf")) << s;
  EXPECT_EQ(DirEntries(dir), std::vector<std::string>{"target.gguf"});
}

}  // namespace
}  // namespace kvfleet::tools
