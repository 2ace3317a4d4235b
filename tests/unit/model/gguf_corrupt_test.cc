// Every malformation of a model file yields a status that names the file,
// the key or tensor, and the reason — never a crash or a read past the end.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_writer.h"
#include "model/model.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

std::vector<uint8_t> TinyModelBytes() {
  GgufWriter w;
  tools::TinyModelOptions o{.dtype = DType::kQ4_1, .num_layers = 1, .context_length = 64};
  EXPECT_TRUE(tools::BuildTinyModel(o, w).ok());
  return w.Serialize();
}

std::string WriteBytes(const testing::TempDir& dir, const std::vector<uint8_t>& bytes, const std::string& name) {
  const std::string path = dir.Path(name);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// Byte offset just past a tensor's name in the tensor directory: there follow
// n_dims (u32), dims (u64 each), type (u32), offset (u64).
size_t TensorInfoAfterName(const std::vector<uint8_t>& bytes, const std::string& name) {
  std::string needle(8, '\0');
  const uint64_t len = name.size();
  std::memcpy(needle.data(), &len, 8);
  needle += name;
  const auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end()) << name;
  return static_cast<size_t>(it - bytes.begin()) + needle.size();
}

template <typename T>
void Poke(std::vector<uint8_t>& bytes, size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}

void ExpectError(const absl::Status& s, absl::StatusCode code, const std::vector<std::string>& mentions) {
  EXPECT_EQ(s.code(), code) << s;
  for (const std::string& m : mentions) EXPECT_NE(s.message().find(m), std::string::npos) << "'" << m << "' not in: " << s;
}

TEST(GgufCorruptTest, IntactTinyModelLoads) {
  testing::TempDir dir;
  auto m = Model::Load(WriteBytes(dir, TinyModelBytes(), "ok.gguf"));
  EXPECT_TRUE(m.ok()) << m.status();
}

TEST(GgufCorruptTest, MissingAndEmptyFiles) {
  testing::TempDir dir;
  ExpectError(GgufFile::Open(dir.Path("absent.gguf")).status(), absl::StatusCode::kNotFound, {"absent.gguf"});
  ExpectError(GgufFile::Open(WriteBytes(dir, {}, "empty.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"empty.gguf", "empty"});
}

TEST(GgufCorruptTest, BadMagic) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  bytes[0] = 'X';
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "magic.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"magic.gguf", "bad magic"});
}

TEST(GgufCorruptTest, UnsupportedVersion) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  Poke<uint32_t>(bytes, 4, 99);
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "v.gguf")).status(), absl::StatusCode::kUnimplemented,
              {"version 99"});
}

TEST(GgufCorruptTest, TruncatedAtEveryRegionFailsCleanly) {
  testing::TempDir dir;
  const auto bytes = TinyModelBytes();
  // Every length through the header and directory, then strides through data.
  const size_t directory_end = TensorInfoAfterName(bytes, "output.weight") + 64;
  for (size_t len = 1; len < bytes.size(); len += (len < directory_end ? 1 : 997)) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + len);
    const std::string path = WriteBytes(dir, cut, "cut.gguf");
    auto m = Model::Load(path);
    ASSERT_FALSE(m.ok()) << "a file cut to " << len << " of " << bytes.size() << " bytes loaded";
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << len << ": " << m.status();
    EXPECT_NE(m.status().message().find("cut.gguf"), std::string::npos) << m.status();
  }
}

TEST(GgufCorruptTest, TruncatedDataNamesTheTensor) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  bytes.resize(bytes.size() - 100);
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "short.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"short.gguf", "tensor 'output.weight'", "outside the file"});
}

TEST(GgufCorruptTest, OffsetOutOfRange) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  const size_t at = TensorInfoAfterName(bytes, "blk.0.ffn_up.weight");
  Poke<uint64_t>(bytes, at + 4 + 2 * 8 + 4, uint64_t{1} << 40);
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "off.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"off.gguf", "blk.0.ffn_up.weight", "outside the file"});
}

TEST(GgufCorruptTest, MisalignedOffset) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  const size_t at = TensorInfoAfterName(bytes, "blk.0.ffn_up.weight");
  Poke<uint64_t>(bytes, at + 4 + 2 * 8 + 4, 3);
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "align.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"blk.0.ffn_up.weight", "aligned"});
}

TEST(GgufCorruptTest, UnsupportedTensorType) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  const size_t at = TensorInfoAfterName(bytes, "blk.0.attn_k.weight");
  Poke<uint32_t>(bytes, at + 4 + 2 * 8, 23);  // IQ4_XS: refused by name, with what is supported
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "type.gguf")).status(), absl::StatusCode::kUnimplemented,
              {"type.gguf", "blk.0.attn_k.weight", "type IQ4_XS is not supported", "Q4_K", "Q6_K", "requantize"});
  Poke<uint32_t>(bytes, at + 4 + 2 * 8, 77);  // no ggml type at all
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "code.gguf")).status(), absl::StatusCode::kUnimplemented,
              {"code.gguf", "blk.0.attn_k.weight", "type code 77 is not supported"});
}

TEST(GgufCorruptTest, ImplausibleDimensions) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  const size_t at = TensorInfoAfterName(bytes, "blk.0.attn_k.weight");
  Poke<uint32_t>(bytes, at, 9);  // n_dims
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "dims.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"blk.0.attn_k.weight", "dimensions"});
}

// Dimensions each in range whose byte size overflows (found by the GGUF
// fuzzer): refused by name, not computed.
TEST(GgufCorruptTest, ATensorTooLargeForAnyFileIsRefused) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  const size_t at = TensorInfoAfterName(bytes, "blk.0.attn_k.weight");  // n_dims is 2
  Poke<uint64_t>(bytes, at + 4, uint64_t{1} << 40);
  Poke<uint64_t>(bytes, at + 12, uint64_t{1} << 21);
  Poke<uint32_t>(bytes, at + 20, 0);  // F32: 2^61 elements are in range, their 2^63 bytes are not
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "huge.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"blk.0.attn_k.weight", "do not fit in any file"});
}

TEST(GgufCorruptTest, ImplausibleStringLength) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  Poke<uint64_t>(bytes, 24, uint64_t{1} << 60);  // length of the first metadata key
  ExpectError(GgufFile::Open(WriteBytes(dir, bytes, "str.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"str.gguf", "implausible"});
}

TEST(GgufCorruptTest, WrongShapeNamesTensorAndShapes) {
  testing::TempDir dir;
  GgufWriter w;
  tools::TinyModelOptions o{.dtype = DType::kF32, .num_layers = 1};
  ASSERT_TRUE(tools::BuildTinyModel(o, w).ok());
  // A second file whose attn_q has the wrong number of rows: rebuild with
  // fewer heads but declare the original head count.
  auto bytes = w.Serialize();
  const size_t at = TensorInfoAfterName(bytes, "blk.0.attn_q.weight");
  uint64_t rows;
  std::memcpy(&rows, bytes.data() + at + 4 + 8, 8);
  Poke<uint64_t>(bytes, at + 4 + 8, rows / 2);  // data shrinks: still inside the file
  auto m = Model::Load(WriteBytes(dir, bytes, "shape.gguf"));
  ExpectError(m.status(), absl::StatusCode::kInvalidArgument,
              {"shape.gguf", "blk.0.attn_q.weight", "has shape [32, 64]", "expected [64, 64]"});
}

TEST(GgufCorruptTest, UnsupportedArchitecture) {
  testing::TempDir dir;
  GgufWriter w;
  w.SetString("general.architecture", "gptneox");
  ASSERT_TRUE(w.WriteFile(dir.Path("arch.gguf")).ok());
  ExpectError(Model::Load(dir.Path("arch.gguf")).status(), absl::StatusCode::kUnimplemented,
              {"arch.gguf", "gptneox", "not supported"});
}

TEST(GgufCorruptTest, MissingKeyIsNamed) {
  testing::TempDir dir;
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  ASSERT_TRUE(w.WriteFile(dir.Path("key.gguf")).ok());
  ExpectError(Model::Load(dir.Path("key.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"key.gguf", "'llama.context_length' is missing"});
}

TEST(GgufCorruptTest, MissingTensorIsNamed) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  const size_t at = TensorInfoAfterName(bytes, "blk.0.ffn_gate.weight");
  bytes[at - 1] = 'X';  // rename to ...weighX
  ExpectError(Model::Load(WriteBytes(dir, bytes, "miss.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"miss.gguf", "blk.0.ffn_gate.weight", "missing"});
}

// Norm weights are read as floats: F16 and BF16 are converted at load, a
// quantized one is refused by name.
TEST(GgufCorruptTest, NormWeightsMustBeFloats) {
  testing::TempDir dir;
  auto bytes = TinyModelBytes();
  const size_t at = TensorInfoAfterName(bytes, "output_norm.weight");
  Poke<uint32_t>(bytes, at + 4 + 8, 1);  // F16: half the bytes, still inside
  EXPECT_TRUE(Model::Load(WriteBytes(dir, bytes, "f16.gguf")).ok());
  Poke<uint32_t>(bytes, at + 4 + 8, 8);  // Q8_0: 34 bytes a block of 32, still inside
  ExpectError(Model::Load(WriteBytes(dir, bytes, "norm.gguf")).status(), absl::StatusCode::kInvalidArgument,
              {"output_norm.weight", "Q8_0", "must be F32, F16 or BF16"});
}

}  // namespace
}  // namespace kvfleet::model
