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

namespace kvfleet::bench {

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat("expected a flag like --name value, got '", arg, "'"));
    }
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      flags.values_[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      flags.values_[arg.substr(2)] = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag ", arg, " needs a value"));
    }
  }
  return flags;
}

absl::StatusOr<int64_t> Flags::Int(const std::string& name, int64_t fallback) {
  used_[name] = true;
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be an integer, got '", it->second, "'"));
  }
  return v;
}

absl::StatusOr<double> Flags::Double(const std::string& name, double fallback) {
  used_[name] = true;
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  double v = 0;
  if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be a number, got '", it->second, "'"));
  }
  return v;
}

std::string Flags::String(const std::string& name, const std::string& fallback) {
  used_[name] = true;
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<std::vector<int64_t>> Flags::IntList(const std::string& name, const std::string& fallback) {
  const std::string text = String(name, fallback);
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " must be a comma-separated list of positive integers, got '", text, "'"));
    }
    out.push_back(v);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, " is empty"));
  return out;
}

absl::Status Flags::Finish() const {
  for (const auto& [name, value] : values_) {
    if (!used_.contains(name)) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
  }
  return absl::OkStatus();
}

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

absl::StatusOr<std::unique_ptr<model::LlamaModel>> LoadModel(const std::string& path) {
  absl::StatusOr<std::unique_ptr<model::LlamaModel>> model = model::LlamaModel::Load(path);
  if (!model.ok()) {
    return absl::Status(model.status().code(), absl::StrCat(model.status().message(),
                                                            " (the default model comes from scripts/fetch_model.sh)"));
  }
  return model;
}

absl::StatusOr<std::unique_ptr<engine::CpuExecutor>> MakeExecutor(const model::LlamaModel& model, int64_t num_blocks,
                                                                  int num_threads) {
  return engine::CpuExecutor::Create(model, {.num_blocks = num_blocks, .block_size = 16, .num_threads = num_threads});
}

}  // namespace kvfleet::bench
