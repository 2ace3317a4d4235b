// The worker's default mode ("auto") from the model's calibration record:
// a real kvfleet-worker process reads the record beside its model, runs the
// fastest passing mode, and says so in its log, GetInfo and metrics; a
// record for other weights, or none, keeps the exact mode; flags win.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "engine/calibration/calibration_record.h"
#include "engine/executor/executor_factory.h"
#include "model/model.h"
#include "model/model_fingerprint.h"
#include "tests/integration/services/worker/worker_harness.h"
#include "tests/testing/service_process.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::testing {
namespace {

using engine::CpuActivations;
using kernels::KvCacheDtype;

engine::ModeFigures Mode(CpuActivations a, KvCacheDtype kv, double mean_kl) {
  return {.cpu_activations = a, .kv_cache_dtype = kv, .numerics = engine::CpuNumerics(a, kv), .mean_kl = mean_kl};
}

// A record in which 8-bit activations with an int8 cache pass the gate.
engine::CalibrationRecord RecordFor(const std::string& fingerprint) {
  engine::CalibrationRecord r;
  r.model_fingerprint = fingerprint;
  r.text = {.name = "t", .sha256 = "0", .positions = 10, .context = 16};
  r.reference = "test";
  r.gate = {.activations_mean_kl = 0.004, .kv_mean_kl = 0.005, .source = "test gate"};
  r.modes = {Mode(CpuActivations::kF32, KvCacheDtype::kF16, 0), Mode(CpuActivations::kQ8, KvCacheDtype::kF16, 0.003),
             Mode(CpuActivations::kQ8, KvCacheDtype::kInt8, 0.0045),
             Mode(CpuActivations::kQ8, KvCacheDtype::kFp8E4M3, 0.02)};
  for (engine::ModeFigures& m : r.modes) m.passes = engine::PassesGate(m, r.gate);
  return r;
}

struct Started {
  v1::WorkerInfo info;
  std::string log;
  double metric = 0;
};

Started StartAndAsk(WorkerHarness& harness, const std::string& model, const std::vector<std::string>& args,
                    const std::string& numerics, const std::string& source) {
  Started s;
  const absl::Status started = harness.Start(args, model);
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return s;
  grpc::ClientContext ctx;
  EXPECT_TRUE(harness.Stub()->GetInfo(&ctx, v1::GetInfoRequest(), &s.info).ok());
  std::ifstream in(harness.LogPath());
  s.log.assign(std::istreambuf_iterator<char>(in), {});
  auto scrape = harness.ScrapeMetrics();
  EXPECT_TRUE(scrape.ok()) << scrape.status();
  if (scrape.ok()) {
    s.metric =
        scrape
            ->Value("kvfleet_worker_device_info", {{"device", "cpu"}, {"numerics", numerics}, {"mode_source", source}})
            .value_or(0);
  }
  return s;
}

class WorkerModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.Path("tiny.gguf");
    ASSERT_TRUE(WriteHarnessModel(model_).ok());
    auto m = model::Model::Load(model_);
    ASSERT_TRUE(m.ok()) << m.status();
    fingerprint_ = model::ModelFingerprint(**m);
  }
  TempDir dir_;
  std::string model_;
  std::string fingerprint_;
};

TEST_F(WorkerModeTest, WithoutARecordTheExactModeRunsAndTheLogSaysWhy) {
  WorkerHarness harness;
  const Started s = StartAndAsk(harness, model_, {}, "cpu/1", "exact");
  EXPECT_EQ(s.info.numerics(), "cpu/1");
  EXPECT_EQ(s.info.cpu_activations(), "f32");
  EXPECT_EQ(s.info.kv_cache_dtype(), "f16");
  EXPECT_EQ(s.info.mode_source(), "exact");
  EXPECT_NE(s.log.find("numerics mode: exact: no calibration record at " + model_ + ".calibration.json"),
            std::string::npos)
      << s.log;
  EXPECT_EQ(s.metric, 1.0);
}

TEST_F(WorkerModeTest, TheRecordBesideTheModelChoosesTheFastestPassingMode) {
  ASSERT_TRUE(engine::WriteCalibrationRecord(engine::CalibrationPathFor(model_), RecordFor(fingerprint_)).ok());
  WorkerHarness harness;
  const Started s = StartAndAsk(harness, model_, {}, "cpu-q8/3+kv-int8", "calibration");
  EXPECT_EQ(s.info.numerics(), "cpu-q8/3+kv-int8");  // the executor runs it
  EXPECT_EQ(s.info.cpu_activations(), "q8");
  EXPECT_EQ(s.info.kv_cache_dtype(), "int8");
  EXPECT_EQ(s.info.mode_source(), "calibration");
  EXPECT_NE(s.info.mode_reason().find("q8 activations, int8 KV from"), std::string::npos) << s.info.mode_reason();
  EXPECT_NE(s.log.find("numerics mode: q8 activations, int8 KV from"), std::string::npos) << s.log;
  EXPECT_EQ(s.metric, 1.0);
  // It serves in that mode.
  const StreamResult r = harness.Generate(TinyRequest(1, 12, 8));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens.size(), 8u);
}

TEST_F(WorkerModeTest, FlagsWinAndOneFlagKeepsItsAxis) {
  const std::string record = dir_.Path("elsewhere.json");
  ASSERT_TRUE(engine::WriteCalibrationRecord(record, RecordFor(fingerprint_)).ok());
  {
    WorkerHarness harness;
    const Started s =
        StartAndAsk(harness, model_, {"--calibration", record, "--kv-cache-dtype", "f16"}, "cpu-q8/3", "calibration");
    EXPECT_EQ(s.info.numerics(), "cpu-q8/3");
  }
  {
    WorkerHarness harness;
    const Started s =
        StartAndAsk(harness, model_, {"--calibration", record, "--cpu-activations", "f32", "--kv-cache-dtype", "f16"},
                    "cpu/1", "flags");
    EXPECT_EQ(s.info.mode_source(), "flags");
    EXPECT_EQ(s.metric, 1.0);
  }
}

TEST_F(WorkerModeTest, OneFlagWithoutARecordIsReportedAsTheFlags) {
  WorkerHarness harness;
  const Started s = StartAndAsk(harness, model_, {"--kv-cache-dtype", "int8"}, "cpu/1+kv-int8", "flags");
  EXPECT_EQ(s.info.kv_cache_dtype(), "int8");
  EXPECT_EQ(s.info.cpu_activations(), "f32");
  EXPECT_EQ(s.info.mode_source(), "flags");
  EXPECT_NE(s.info.mode_reason().find("int8 KV by flag; exact otherwise: no calibration record"), std::string::npos)
      << s.info.mode_reason();
  EXPECT_EQ(s.metric, 1.0);
}

TEST_F(WorkerModeTest, ARecordOfOtherWeightsIsNotUsed) {
  ASSERT_TRUE(engine::WriteCalibrationRecord(engine::CalibrationPathFor(model_), RecordFor(std::string(64, '0'))).ok());
  WorkerHarness harness;
  const Started s = StartAndAsk(harness, model_, {}, "cpu/1", "exact");
  EXPECT_EQ(s.info.numerics(), "cpu/1");
  EXPECT_NE(s.log.find("was measured on other weights"), std::string::npos) << s.log;
}

TEST_F(WorkerModeTest, ABrokenRecordIsNamedAndTheExactModeRuns) {
  std::ofstream(engine::CalibrationPathFor(model_)) << "{\"format\": \"kvfleet-calibration-v1\"}";
  WorkerHarness harness;
  const Started s = StartAndAsk(harness, model_, {}, "cpu/1", "exact");
  EXPECT_NE(s.log.find("the calibration record is not usable"), std::string::npos) << s.log;
}

// int8_rotated_scaled runs on the record's key channel scales (their digest
// in the numerics identity) and serves; a record without them refuses the
// format at start, saying how to make one.
TEST_F(WorkerModeTest, ScaledKeysRunOnTheRecordsScalesOrAreRefusedAtStart) {
  auto m = model::Model::Load(model_);
  ASSERT_TRUE(m.ok()) << m.status();
  const model::ModelConfig& c = (*m)->config();
  engine::CalibrationRecord r = RecordFor(fingerprint_);
  r.modes.push_back(Mode(CpuActivations::kQ8, KvCacheDtype::kInt8RotatedScaled, 0.001));
  r.modes.back().passes = true;
  engine::KeyChannelScales scales{.num_layers = c.num_layers, .num_kv_heads = c.num_kv_heads, .head_dim = c.head_dim};
  for (int64_t i = 0; i < c.num_layers * c.num_kv_heads * c.head_dim; ++i) scales.exponents.push_back(i % 3);
  r.key_channel_scales = scales;
  ASSERT_TRUE(engine::WriteCalibrationRecord(engine::CalibrationPathFor(model_), r).ok());
  const std::string numerics = "cpu-q8/3+kv-int8_rotated_scaled-" + scales.Digest();
  {
    WorkerHarness harness;
    const Started s = StartAndAsk(harness, model_, {}, numerics, "calibration");
    EXPECT_EQ(s.info.numerics(), numerics);
    EXPECT_EQ(s.info.kv_cache_dtype(), "int8_rotated_scaled");
    EXPECT_EQ(s.metric, 1.0);
    const StreamResult out = harness.Generate(TinyRequest(1, 12, 8));
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.tokens.size(), 8u);
  }
  r.modes.pop_back();
  r.key_channel_scales.reset();
  ASSERT_TRUE(engine::WriteCalibrationRecord(engine::CalibrationPathFor(model_), r).ok());
  auto worker = WorkerProcess::Start({.binary = ServiceBinary("kvfleet-worker", KVFLEET_WORKER_BINARY),
                                      .model_path = model_,
                                      .extra_args = {"--kv-cache-dtype", "int8_rotated_scaled"},
                                      .stderr_path = dir_.Path("refused.log"),
                                      .ready_timeout = absl::Seconds(30)});
  ASSERT_FALSE(worker.ok());
  std::ifstream in(dir_.Path("refused.log"));
  const std::string log(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(log.find("it has no key_channel_scales"), std::string::npos) << log;
  EXPECT_NE(log.find("kvfleet eval --calibrate"), std::string::npos) << log;
  EXPECT_EQ(worker.status().message().find("listening grpc="), std::string::npos) << worker.status();
}

TEST_F(WorkerModeTest, ARecordNamedByTheFlagMustExistAndBeOne) {
  for (const bool exists : {false, true}) {
    const std::string record = dir_.Path(exists ? "broken.json" : "missing.json");
    if (exists) std::ofstream(record) << "not json";
    auto worker = WorkerProcess::Start({.binary = ServiceBinary("kvfleet-worker", KVFLEET_WORKER_BINARY),
                                        .model_path = model_,
                                        .extra_args = {"--calibration", record},
                                        .stderr_path = dir_.Path("refused.log"),
                                        .ready_timeout = absl::Seconds(30)});
    ASSERT_FALSE(worker.ok()) << record;
    std::ifstream in(dir_.Path("refused.log"));
    const std::string log(std::istreambuf_iterator<char>(in), {});
    EXPECT_NE(log.find("--calibration " + record), std::string::npos) << log;
    // Refused before it binds: it never announced a port.
    EXPECT_EQ(worker.status().message().find("listening grpc="), std::string::npos) << worker.status();
  }
}

}  // namespace
}  // namespace kvfleet::testing
