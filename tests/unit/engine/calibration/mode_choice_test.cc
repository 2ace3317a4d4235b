// The worker's default mode: the fastest passing mode of a record that
// matches the weights, the backend and this build's kernels; the exact mode
// otherwise, with the reason said.
#include "engine/calibration/mode_choice.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/executor/executor_factory.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::engine {
namespace {

using kernels::KvCacheDtype;

ModeFigures Mode(CpuActivations a, KvCacheDtype kv, double mean_kl) {
  return {.cpu_activations = a, .kv_cache_dtype = kv, .numerics = CpuNumerics(a, kv), .mean_kl = mean_kl};
}

// Every mode, with the KL divergences given (f32+f16 is the exact one).
CalibrationRecord Record(double q8_f16, double f32_int8, double q8_int8, double f32_fp8, double q8_fp8) {
  CalibrationRecord r;
  r.model_fingerprint = "fp";
  r.gate = {.activations_mean_kl = 0.0035, .kv_mean_kl = 0.005, .source = "llama.cpp"};
  r.modes = {Mode(CpuActivations::kF32, KvCacheDtype::kF16, 0),
             Mode(CpuActivations::kQ8, KvCacheDtype::kF16, q8_f16),
             Mode(CpuActivations::kF32, KvCacheDtype::kInt8, f32_int8),
             Mode(CpuActivations::kQ8, KvCacheDtype::kInt8, q8_int8),
             Mode(CpuActivations::kF32, KvCacheDtype::kFp8E4M3, f32_fp8),
             Mode(CpuActivations::kQ8, KvCacheDtype::kFp8E4M3, q8_fp8)};
  return r;
}

const CalibrationMatch kCpu{.model_fingerprint = "fp", .backend = "cpu", .numerics_of = CpuNumerics};
const ModeSetting kAuto{};

TEST(ModeChoiceTest, TheGateIsLlamaCppsDivergenceForEachAxis) {
  const CalibrationGate gate{.activations_mean_kl = 0.0035, .kv_mean_kl = 0.005};
  EXPECT_TRUE(PassesGate(Mode(CpuActivations::kF32, KvCacheDtype::kF16, 1.0), gate));  // exact: always
  EXPECT_TRUE(PassesGate(Mode(CpuActivations::kQ8, KvCacheDtype::kF16, 0.0035), gate));
  EXPECT_FALSE(PassesGate(Mode(CpuActivations::kQ8, KvCacheDtype::kF16, 0.0036), gate));
  EXPECT_TRUE(PassesGate(Mode(CpuActivations::kQ8, KvCacheDtype::kInt8, 0.0049), gate));  // the KV bar
  EXPECT_FALSE(PassesGate(Mode(CpuActivations::kF32, KvCacheDtype::kInt8, 0.0051), gate));
}

TEST(ModeChoiceTest, TheFastestPassingModeWins) {
  const ChosenMode all = ChooseMode(kAuto, Record(0.003, 0.001, 0.004, 0.002, 0.006), "r.json", kCpu);
  EXPECT_EQ(all.activations, CpuActivations::kQ8);
  EXPECT_EQ(all.kv, KvCacheDtype::kInt8);  // q8+fp8 fails its bar
  EXPECT_TRUE(all.from_record);
  EXPECT_NE(all.reason.find("q8 activations, int8 KV from r.json"), std::string::npos) << all.reason;
  // q8 fails: float32 activations with the better 8-bit KV format.
  const ChosenMode f32 = ChooseMode(kAuto, Record(0.004, 0.003, 0.006, 0.002, 0.006), "r.json", kCpu);
  EXPECT_EQ(f32.activations, CpuActivations::kF32);
  EXPECT_EQ(f32.kv, KvCacheDtype::kFp8E4M3);
  // Nothing but the exact mode passes.
  const ChosenMode exact = ChooseMode(kAuto, Record(0.01, 0.01, 0.01, 0.01, 0.01), "r.json", kCpu);
  EXPECT_EQ(exact.activations, CpuActivations::kF32);
  EXPECT_EQ(exact.kv, KvCacheDtype::kF16);
}

TEST(ModeChoiceTest, AFlagKeepsItsAxisAndTheOtherIsChosen) {
  const CalibrationRecord r = Record(0.003, 0.001, 0.004, 0.002, 0.006);
  const ChosenMode kv_pinned = ChooseMode({.kv = KvCacheDtype::kF16}, r, "r.json", kCpu);
  EXPECT_EQ(kv_pinned.activations, CpuActivations::kQ8);
  EXPECT_EQ(kv_pinned.kv, KvCacheDtype::kF16);
  const ChosenMode act_pinned = ChooseMode({.activations = CpuActivations::kF32}, r, "r.json", kCpu);
  EXPECT_EQ(act_pinned.activations, CpuActivations::kF32);
  EXPECT_EQ(act_pinned.kv, KvCacheDtype::kInt8);  // lower KL than fp8 at the same rank
  // Both pinned: the flags, even against the record.
  const ChosenMode both =
      ChooseMode({.activations = CpuActivations::kQ8, .kv = KvCacheDtype::kFp8E4M3}, r, "r.json", kCpu);
  EXPECT_EQ(both.activations, CpuActivations::kQ8);
  EXPECT_EQ(both.kv, KvCacheDtype::kFp8E4M3);
  EXPECT_FALSE(both.from_record);
  EXPECT_EQ(both.source, "flags");
  EXPECT_EQ(kv_pinned.source, "calibration");
  // One flag and no record: that axis by flag, the other exact, and it says so.
  const ChosenMode one = ChooseMode({.kv = KvCacheDtype::kInt8}, absl::NotFoundError(""), "m.json", kCpu);
  EXPECT_EQ(one.activations, CpuActivations::kF32);
  EXPECT_EQ(one.kv, KvCacheDtype::kInt8);
  EXPECT_EQ(one.source, "flags");
  EXPECT_NE(one.reason.find("int8 KV by flag; exact otherwise: no calibration record at m.json"), std::string::npos)
      << one.reason;
}

TEST(ModeChoiceTest, ResolveReadsTheRecordAndHashesTheWeightsOnlyWhenItCouldBeUsed) {
  testing::TempDir dir;
  const std::string path = dir.Path("r.json");
  CalibrationRecord r = Record(0.003, 0.001, 0.004, 0.002, 0.006);
  r.model_fingerprint = std::string(64, 'f');
  for (ModeFigures& m : r.modes) m.passes = PassesGate(m, r.gate);
  ASSERT_TRUE(WriteCalibrationRecord(path, r).ok());
  int hashed = 0;
  ModeRequest q{.record_path = path,
                .backend = "cuda",
                .fingerprint =
                    [&] {
                      ++hashed;
                      return std::string(64, 'f');
                    },
                .numerics_of = CpuNumerics};
  absl::StatusOr<ChosenMode> gpu = ResolveMode(q);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->source, "exact");
  EXPECT_EQ(hashed, 0) << "a record of another backend needs no fingerprint";
  q.backend = "cpu";
  absl::StatusOr<ChosenMode> cpu = ResolveMode(q);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->source, "calibration");
  EXPECT_EQ(cpu->kv, KvCacheDtype::kInt8);
  EXPECT_EQ(hashed, 1);
  // Named by a flag, a missing record is an error; by default, only exact.
  q.record_path = dir.Path("none.json");
  EXPECT_TRUE(ResolveMode(q).ok());
  q.record_required = true;
  const absl::Status missing = ResolveMode(q).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("--calibration " + dir.Path("none.json")), std::string::npos) << missing;
}

TEST(ModeChoiceTest, ARecordForOtherWeightsBackendOrKernelsIsNotUsed) {
  const CalibrationRecord good = Record(0.003, 0.001, 0.004, 0.002, 0.006);
  auto expect_exact = [](const ChosenMode& m, const std::string& why) {
    EXPECT_EQ(m.activations, CpuActivations::kF32) << why;
    EXPECT_EQ(m.kv, KvCacheDtype::kF16) << why;
    EXPECT_FALSE(m.from_record) << why;
    EXPECT_NE(m.reason.find(why), std::string::npos) << m.reason;
  };
  expect_exact(ChooseMode(kAuto, absl::NotFoundError("none"), "m.gguf.calibration.json", kCpu),
               "exact: no calibration record at m.gguf.calibration.json");
  expect_exact(ChooseMode(kAuto, absl::InvalidArgumentError("bad field"), "r.json", kCpu), "bad field");
  CalibrationMatch other_weights = kCpu;
  other_weights.model_fingerprint = "fq";
  expect_exact(ChooseMode(kAuto, good, "r.json", other_weights), "measured on other weights");
  CalibrationRecord under_adapter = good;
  under_adapter.adapter = "sql@" + std::string(64, 'b');
  expect_exact(ChooseMode(kAuto, under_adapter, "r.json", kCpu), "measured under the LoRA adapter sql@bbbb");
  CalibrationMatch gpu = kCpu;
  gpu.backend = "cuda";
  expect_exact(ChooseMode(kAuto, good, "r.json", gpu), "measured on the cpu backend; this worker runs on cuda");
  CalibrationMatch new_kernels = kCpu;
  new_kernels.numerics_of = [](CpuActivations a, KvCacheDtype kv) {
    return a == CpuActivations::kF32 && kv == KvCacheDtype::kF16 ? CpuNumerics(a, kv) : std::string("cpu-q8/99");
  };
  const ChosenMode stale = ChooseMode(kAuto, good, "r.json", new_kernels);
  EXPECT_EQ(stale.activations, CpuActivations::kF32);
  EXPECT_EQ(stale.kv, KvCacheDtype::kF16);
}

// int8_rotated_scaled, chosen by the record or named by a flag, carries the
// record's scales; without a record of these weights that has them, it is
// an error that says how to make one.
TEST(ModeChoiceTest, ScaledKeysTakeTheRecordsScalesOrAreRefused) {
  testing::TempDir dir;
  const std::string path = dir.Path("r.json");
  CalibrationRecord r = Record(0.003, 0.001, 0.004, 0.002, 0.006);
  r.model_fingerprint = std::string(64, 'f');
  r.modes.push_back(Mode(CpuActivations::kQ8, KvCacheDtype::kInt8RotatedScaled, 0.0001));
  r.key_channel_scales = KeyChannelScales{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .exponents = {0, 4}};
  for (ModeFigures& m : r.modes) m.passes = PassesGate(m, r.gate);
  ASSERT_TRUE(WriteCalibrationRecord(path, r).ok());
  ModeRequest q{.record_path = path,
                .backend = "cpu",
                .fingerprint = [] { return std::string(64, 'f'); },
                .numerics_of = CpuNumerics};
  absl::StatusOr<ChosenMode> chosen = ResolveMode(q);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->kv, KvCacheDtype::kInt8RotatedScaled);
  ASSERT_NE(chosen->key_channel_scales, nullptr);
  EXPECT_EQ(chosen->key_channel_scales->exponents, (std::vector<uint8_t>{0, 4}));
  // Both axes by flag still read the record for the scales.
  q.setting = {.activations = CpuActivations::kF32, .kv = KvCacheDtype::kInt8RotatedScaled};
  chosen = ResolveMode(q);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->source, "flags");
  ASSERT_NE(chosen->key_channel_scales, nullptr);
  // Other weights, or no record: refused, saying what to do.
  q.fingerprint = [] { return std::string(64, 'e'); };
  absl::Status refused = ResolveMode(q).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("measured on other weights"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("kvfleet eval --calibrate"), std::string::npos) << refused;
  // A record measured under an adapter gives no worker its scales.
  CalibrationRecord under_adapter = r;
  under_adapter.adapter = "sql@" + std::string(64, 'b');
  ASSERT_TRUE(WriteCalibrationRecord(dir.Path("sql.json"), under_adapter).ok());
  q.fingerprint = [] { return std::string(64, 'f'); };
  q.record_path = dir.Path("sql.json");
  refused = ResolveMode(q).status();
  EXPECT_NE(refused.message().find("measured under the LoRA adapter sql@"), std::string::npos) << refused;
  q.record_path = dir.Path("none.json");
  refused = ResolveMode(q).status();
  EXPECT_NE(refused.message().find("there is none"), std::string::npos) << refused;
  // A plain mode needs no record at all.
  q.setting.kv = KvCacheDtype::kInt8Rotated;
  EXPECT_TRUE(ResolveMode(q).ok());
}

TEST(ModeChoiceTest, AutoIsAFlagValue) {
  EXPECT_FALSE(ParseCpuActivationsSetting("auto")->has_value());
  EXPECT_EQ(**ParseCpuActivationsSetting("q8"), CpuActivations::kQ8);
  EXPECT_NE(ParseCpuActivationsSetting("q4").status().message().find("f32 or q8, not 'q4', or auto"),
            std::string::npos);
  EXPECT_FALSE(ParseKvCacheDtypeSetting("auto")->has_value());
  EXPECT_EQ(**ParseKvCacheDtypeSetting("int8"), KvCacheDtype::kInt8);
  EXPECT_NE(ParseKvCacheDtypeSetting("int4").status().message().find(
                "f16, int8, int8_rotated, int8_rotated_scaled or fp8_e4m3, not 'int4', or auto"),
            std::string::npos);
}

}  // namespace
}  // namespace kvfleet::engine
