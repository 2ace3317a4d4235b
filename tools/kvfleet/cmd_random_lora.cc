// kvfleet random-lora: a random-weight LoRA adapter for a model, in PEFT's
// format, for tests and benchmarks.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cache_dir.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "model/lora/peft_adapter_writer.h"
#include "model/model_fingerprint.h"
#include "tools/kvfleet/commands.h"
#include "tools/tiny_model/tiny_lora.h"

namespace kvfleet::tools {
namespace {

constexpr char kUsage[] = R"(usage: kvfleet random-lora --model PATH --out DIR [--rank R] [--alpha A]
                           [--targets q_proj,k_proj,...] [--seed N] [--magnitude X]

Writes a LoRA adapter of random weights for the model in PATH to DIR, in
Hugging Face PEFT's format (adapter_config.json, adapter_model.safetensors):
A and B uniform in ±X (default 0.05) on the target projections of every
layer (default all seven: q_proj k_proj v_proj o_proj gate_proj up_proj
down_proj), rank R (default 8), alpha A (default 2R). The config records
the model's fingerprint, so workers of other weights refuse it. The same
options always give the same files. For measuring and testing adapters; a
trained adapter is PEFT's (models/lora/ says how one was made).
)";

}  // namespace

absl::Status RunRandomLora(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags,
                   Flags::Parse(args, {"model", "out", "rank", "alpha", "targets", "seed", "magnitude"}, {}));
  ASSIGN_OR_RETURN(const std::string path, flags.GetString("model"));
  ASSIGN_OR_RETURN(const std::string out, flags.GetString("out"));
  ASSIGN_OR_RETURN(const int64_t rank, flags.GetInt("rank", 8));
  if (rank < 1 || rank > 512) return absl::InvalidArgumentError("--rank must be in [1, 512]");
  ASSIGN_OR_RETURN(const double alpha, flags.GetDouble("alpha", 2.0 * static_cast<double>(rank)));
  ASSIGN_OR_RETURN(const int64_t seed, flags.GetInt("seed", 1));
  ASSIGN_OR_RETURN(const double magnitude, flags.GetDouble("magnitude", 0.05));
  RandomLoraOptions o{.name = out,
                      .rank = static_cast<int32_t>(rank),
                      .seed = static_cast<uint32_t>(seed),
                      .magnitude = static_cast<float>(magnitude),
                      .alpha = alpha};
  if (flags.Has("targets")) {
    o.targets.clear();
    for (absl::string_view module : absl::StrSplit(flags.GetString("targets", ""), ',', absl::SkipWhitespace())) {
      bool known = false;
      for (int t = 0; t < model::kLoraTargets; ++t) {
        if (model::LoraTargetModule(static_cast<model::Projection>(t)) ==
            std::string_view(module.data(), module.size())) {
          o.targets.push_back(static_cast<model::Projection>(t));
          known = true;
        }
      }
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat("--targets: '", std::string(module),
                         "' is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"));
      }
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::Load(path));
  const model::LoraAdapter adapter = RandomLoraAdapter(*m, o);
  RETURN_IF_ERROR(
      model::WritePeftAdapter(adapter, out, model::CachedModelFingerprint(*m, DefaultCacheDir()), &m->config()));
  std::printf("wrote %s: rank %d, %.1f MiB of float32 pairs on %zu projections of %zu layers\n", out.c_str(),
              adapter.rank, adapter.parameters() * 4.0 / (1 << 20), o.targets.size(), adapter.layers.size());
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
