// The record's file: written and read back whole, refused with the file and
// field named when it is not one, found beside a model file or inside a
// checkpoint directory.
#include "engine/calibration/calibration_record.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/write_file.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::engine {
namespace {

CalibrationRecord TwoModes() {
  CalibrationRecord r;
  r.model_fingerprint = std::string(64, 'a');
  r.text = {.name = "design.md", .sha256 = "ff", .positions = 1016, .context = 256};
  r.reference = "float64 numpy";
  r.gate = {.activations_mean_kl = 0.00355, .kv_mean_kl = 0.005, .source = "llama.cpp"};
  r.modes.push_back({.numerics = "cpu/1", .perplexity = 25.17, .passes = true});
  r.modes.push_back({.cpu_activations = CpuActivations::kQ8,
                     .kv_cache_dtype = kernels::KvCacheDtype::kInt8,
                     .numerics = "cpu-q8/3+kv-int8",
                     .perplexity = 25.3,
                     .mean_kl = 0.004,
                     .median_kl = 0.001,
                     .p99_kl = 0.02,
                     .max_kl = 0.3,
                     .same_top1 = 0.97,
                     .tokens_per_second = 800,
                     .passes = true});
  r.command = "kvfleet eval --calibrate";
  return r;
}

// Writes `record` to `path`, replaces the first `from` in its text with
// `to`, and reads it back.
absl::Status ReadEdited(const std::string& path, const CalibrationRecord& record, const std::string& from,
                        const std::string& to) {
  if (absl::Status s = WriteCalibrationRecord(path, record); !s.ok()) return s;
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = text.find(from);
  if (at == std::string::npos) return absl::InternalError(absl::StrCat("the test's '", from, "' is not in ", text));
  text.replace(at, from.size(), to);
  if (absl::Status s = WriteFile(path, text); !s.ok()) return s;
  return ReadCalibrationRecord(path).status();
}

TEST(CalibrationRecordTest, ReadsBackWhatItWrote) {
  testing::TempDir dir;
  const std::string path = dir.Path("m.gguf.calibration.json");
  ASSERT_TRUE(WriteCalibrationRecord(path, TwoModes()).ok());
  absl::StatusOr<CalibrationRecord> r = ReadCalibrationRecord(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_fingerprint, std::string(64, 'a'));
  EXPECT_EQ(r->text.positions, 1016);
  EXPECT_EQ(r->text.context, 256);
  EXPECT_DOUBLE_EQ(r->gate.activations_mean_kl, 0.00355);
  EXPECT_EQ(r->gate.source, "llama.cpp");
  ASSERT_EQ(r->modes.size(), 2u);
  const ModeFigures& q8 = r->modes[1];
  EXPECT_EQ(q8.cpu_activations, CpuActivations::kQ8);
  EXPECT_EQ(q8.kv_cache_dtype, kernels::KvCacheDtype::kInt8);
  EXPECT_EQ(q8.numerics, "cpu-q8/3+kv-int8");
  EXPECT_DOUBLE_EQ(q8.mean_kl, 0.004);
  EXPECT_DOUBLE_EQ(q8.p99_kl, 0.02);
  EXPECT_DOUBLE_EQ(q8.same_top1, 0.97);
  EXPECT_TRUE(q8.passes);
  EXPECT_EQ(r->command, "kvfleet eval --calibrate");
  EXPECT_EQ(r->adapter, "") << "the base model's record names no adapter";
}

TEST(CalibrationRecordTest, ARecordUnderAnAdapterNamesIt) {
  testing::TempDir dir;
  const std::string path = dir.Path("sql.calibration.json");
  CalibrationRecord under = TwoModes();
  under.adapter = "sql@" + std::string(64, 'b');
  ASSERT_TRUE(WriteCalibrationRecord(path, under).ok());
  absl::StatusOr<CalibrationRecord> r = ReadCalibrationRecord(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->adapter, under.adapter);
}

TEST(CalibrationRecordTest, AMissingFileIsNotFound) {
  testing::TempDir dir;
  EXPECT_EQ(ReadCalibrationRecord(dir.Path("none.json")).status().code(), absl::StatusCode::kNotFound);
}

TEST(CalibrationRecordTest, RefusalsNameTheFileAndTheField) {
  testing::TempDir dir;
  const std::string path = dir.Path("r.json");
  struct Case {
    std::string from, to, expect;
  };
  const Case cases[] = {
      {"kvfleet-calibration-v1", "kvfleet-calibration-v0", "format is 'kvfleet-calibration-v0'"},
      {"\"mean_kl\": 0.004", "\"mean_kl\": -1.0", "modes[1].mean_kl must be a finite non-negative number"},
      {"\"kv_cache_dtype\": \"int8\"", "\"kv_cache_dtype\": \"int4\"", "--kv-cache-dtype must be"},
      {"\"numerics\": \"cpu/1\",", "", "modes[0].numerics"},
      {"\"kv_cache_dtype\": \"int8\"", "\"kv_cache_dtype\": \"auto\"", "modes[1].kv_cache_dtype"},
      {"\"mean_kl\": 0.004", "\"mean_kl\": 0.006", "modes[1].passes is true, but its mean KL 0.006"},
      {"\"same_top1\": 0.97", "\"same_top1\": 1.5", "modes[1].same_top1 is a share in [0, 1]"},
      {"\"kv_mean_kl\": 0.005", "\"kv_mean_kl\": 1e400", ""},
      {std::string(64, 'a'), "ab12", "model_fingerprint must be 64 lowercase hex digits"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ReadEdited(path, TwoModes(), c.from, c.to);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.expect;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s;
    EXPECT_NE(s.message().find(path), std::string::npos) << s;
  }
}

CalibrationRecord WithScaledKeys() {
  CalibrationRecord r = TwoModes();
  r.modes.push_back({.kv_cache_dtype = kernels::KvCacheDtype::kInt8RotatedScaled,
                     .numerics = "cpu/1+kv-int8_rotated_scaled",
                     .mean_kl = 0.001,
                     .passes = true});
  r.key_channel_scales =
      KeyChannelScales{.num_layers = 2, .num_kv_heads = 1, .head_dim = 4, .exponents = {0, 15, 3, 0, 1, 0, 0, 10}};
  r.key_scale_rule = "a test's";
  return r;
}

// int8_rotated_scaled's scales travel in the record, a hex digit each.
TEST(CalibrationRecordTest, KeyChannelScalesRoundTripAsHexDigitsPerLayer) {
  testing::TempDir dir;
  const std::string path = dir.Path("r.json");
  ASSERT_TRUE(WriteCalibrationRecord(path, WithScaledKeys()).ok());
  std::ifstream in(path);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(text.find("\"0f30\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"100a\""), std::string::npos) << text;
  absl::StatusOr<CalibrationRecord> r = ReadCalibrationRecord(path);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->key_channel_scales.has_value());
  EXPECT_EQ(r->key_channel_scales->exponents, (std::vector<uint8_t>{0, 15, 3, 0, 1, 0, 0, 10}));
  EXPECT_EQ(r->key_channel_scales->num_layers, 2);
  EXPECT_EQ(r->key_scale_rule, "a test's");
}

TEST(CalibrationRecordTest, ScalesThatDoNotFitTheirShapeOrAreMissingAreRefused) {
  testing::TempDir dir;
  const std::string path = dir.Path("r.json");
  struct Case {
    std::string from, to, expect;
  };
  const Case cases[] = {
      {"\"0f30\"", "\"0f3\"", "key_channel_scales.exponents[0] must be 4 lowercase hex digits"},
      {"\"0f30\"", "\"0g30\"", "key_channel_scales.exponents[0] must be 4"},
      {"\"layers\": 2", "\"layers\": 3", "one string per layer (3 layers)"},
      {"\"key_channel_scales\"", "\"other\"", "lists an int8_rotated_scaled mode but no key_channel_scales"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ReadEdited(path, WithScaledKeys(), c.from, c.to);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.expect;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s;
  }
}

TEST(CalibrationRecordTest, SitsBesideAFileAndInsideADirectory) {
  testing::TempDir dir;
  EXPECT_EQ(CalibrationPathFor(dir.Path("m.gguf")), dir.Path("m.gguf") + ".calibration.json");
  std::filesystem::create_directory(dir.Path("ckpt"));
  EXPECT_EQ(CalibrationPathFor(dir.Path("ckpt")), dir.Path("ckpt") + "/kvfleet-calibration.json");
}

}  // namespace
}  // namespace kvfleet::engine
