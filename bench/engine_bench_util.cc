// Flag parsing, percentiles and model loading shared by the engine_bench
// subcommands.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/engine_bench.h"
#include "common/status_macros.h"
#include "engine/calibration/mode_choice.h"
#include "engine/executor/executor_factory.h"
#include "model/arch/kv_page_groups.h"

namespace kvfleet::bench {

std::string LoadAverage() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "unknown";
  double one = 0, five = 0, fifteen = 0;
  const int got = std::fscanf(f, "%lf %lf %lf", &one, &five, &fifteen);
  std::fclose(f);
  if (got != 3) return "unknown";
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.2f %.2f %.2f on %u cores", one, five, fifteen,
                std::thread::hardware_concurrency());
  return buf;
}

std::string DefaultModelPath() { return KVFLEET_DEFAULT_MODEL_PATH; }

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const size_t index = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(values.size()))) - 1;
  return values[index];
}

absl::StatusOr<std::unique_ptr<model::Model>> LoadModel(const std::string& path) {
  absl::StatusOr<std::unique_ptr<model::Model>> model = model::Model::Load(path);
  if (!model.ok()) {
    return absl::Status(model.status().code(), absl::StrCat(model.status().message(),
                                                            " (the default model comes from scripts/fetch_model.sh)"));
  }
  return model;
}

absl::StatusOr<std::unique_ptr<engine::ModelExecutor>> MakeExecutor(const Flags& flags, const model::Model& model,
                                                                    int64_t num_blocks, int num_threads,
                                                                    const engine::ExecutorLimits& limits,
                                                                    engine::LoraLimits lora) {
  ASSIGN_OR_RETURN(engine::Device device, engine::ResolveDevice(flags.GetString("device", "auto")));
  ASSIGN_OR_RETURN(engine::CpuActivations activations,
                   engine::ParseCpuActivations(flags.GetString("cpu-activations", "f32")));
  ASSIGN_OR_RETURN(kernels::KvCacheDtype kv, engine::ParseKvCacheDtype(flags.GetString("kv-cache-dtype", "f16")));
  std::printf("# device: %s%s, %s KV\n", device.ToString().c_str(),
              activations == engine::CpuActivations::kQ8 ? ", 8-bit activations" : "",
              std::string(kernels::KvCacheDtypeName(kv)).c_str());
  // num_blocks counts blocks of every layer; a sliding-window model's
  // cache is counted in pages of a few layers each (model/arch/kv_page_groups.h).
  const int64_t pages = num_blocks * model::KvPageGroupsFor(model.config(), /*free_window_blocks=*/true).num_groups();
  ASSIGN_OR_RETURN(
      std::shared_ptr<const engine::KeyChannelScales> scales,
      engine::KeyScalesForModes(model, engine::CalibrationPathFor(flags.GetString("model", DefaultModelPath())), false,
                                device.kind, activations, kv));
  return engine::CreateExecutor(model, {.device = device,
                                        .num_blocks = pages,
                                        .block_size = 16,
                                        .num_threads = num_threads,
                                        .cpu_activations = activations,
                                        .kv_cache_dtype = kv,
                                        .key_channel_scales = std::move(scales),
                                        .lora = lora,
                                        .limits = limits});
}

}  // namespace kvfleet::bench
