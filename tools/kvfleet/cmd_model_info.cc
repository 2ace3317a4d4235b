// kvfleet model-info: what a model file holds and what its KV cache costs.
#include <cstdio>
#include <map>

#include "absl/strings/str_format.h"
#include "common/cache_dir.h"
#include "common/flags/flags.h"
#include "common/kv_sizing.h"
#include "common/status_macros.h"
#include "model/model.h"
#include "model/model_fingerprint.h"
#include "tools/kvfleet/commands.h"

namespace kvfleet::tools {

namespace {
constexpr char kUsage[] = R"(usage: kvfleet model-info --model PATH [--fingerprint]

Prints the model's hyperparameters, tensor types and the KV cache cost per
token: 2 × layers × kv_heads × head_dim × bytes per value. --fingerprint
also prints the weights' SHA-256 fingerprint (what calibration records and
draft heads name; reads every weight unless remembered in the cache
directory).
)";
}  // namespace

absl::Status RunModelInfo(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, {"model"}, {"fingerprint"}));
  ASSIGN_OR_RETURN(std::string path, flags.GetString("model"));
  ASSIGN_OR_RETURN(auto model, model::Model::Load(path));
  const model::ModelConfig& hp = model->config();

  std::map<std::string, int64_t> type_counts;
  int64_t params = 0, weight_bytes = 0;
  for (const model::TensorView& t : model->source().tensors()) {
    ++type_counts[std::string(DTypeName(t.dtype))];
    params += t.num_elements;
    weight_bytes += t.num_bytes;
  }
  const KvShape kv = hp.kv_shape();
  const int64_t kv16 = KvBytesPerToken(kv, 2);
  std::printf("model:              %s\n", path.c_str());
  std::printf("name:               %s\n", hp.name.c_str());
  std::printf("architecture:       %s\n", hp.architecture.c_str());
  std::printf("parameters:         %lld (%.1f MiB of weights)\n", static_cast<long long>(params),
              weight_bytes / 1048576.0);
  std::printf("tensor types:      ");
  for (const auto& [name, n] : type_counts) std::printf(" %s×%lld", name.c_str(), static_cast<long long>(n));
  std::printf("\n");
  std::printf("vocabulary:         %lld tokens (%s tokenizer)\n", static_cast<long long>(hp.vocab_size),
              model->vocabulary().model.c_str());
  std::printf("context length:     %lld\n", static_cast<long long>(hp.context_length));
  std::printf("layers:             %lld\n", static_cast<long long>(hp.num_layers));
  std::printf("hidden size:        %lld\n", static_cast<long long>(hp.hidden_size));
  std::printf("ffn size:           %lld\n", static_cast<long long>(hp.ffn_size));
  std::printf("attention heads:    %lld (kv heads %lld, head dim %lld)\n", static_cast<long long>(hp.num_heads),
              static_cast<long long>(hp.num_kv_heads), static_cast<long long>(hp.head_dim));
  for (size_t i = 0; i < hp.ropes.size(); ++i) {
    const model::RopeConfig& r = hp.ropes[i];
    std::string line = absl::StrFormat("theta %g, %d dims, %s pairs", r.theta, r.dim,
                                       r.pairing == model::RopePairing::kAdjacent ? "adjacent" : "half-split");
    if (r.position_scale != 1.0) absl::StrAppendFormat(&line, ", positions x %g", r.position_scale);
    if (!r.freq_factors.empty()) line += ", llama3 frequency factors";
    std::printf("%-20s%s\n", hp.ropes.size() > 1 ? absl::StrFormat("rope[%d]:", i).c_str() : "rope:", line.c_str());
  }
  if (hp.max_window() > 0) {
    std::printf("sliding window:     %lld tokens on %lld of %lld layers\n", static_cast<long long>(hp.max_window()),
                static_cast<long long>(hp.windowed_layers()), static_cast<long long>(hp.num_layers));
  }
  std::printf("format:             %s\n", model::ModelFormatName(model->source().format()));
  std::printf("rms norm eps:       %g\n", hp.rms_norm_eps);
  std::printf("tied embeddings:    %s\n", hp.tied_embeddings ? "yes" : "no");
  std::printf("kv cache per token: %lld bytes at 16-bit (2 × %lld layers × %lld kv heads × %lld × 2 bytes)\n",
              static_cast<long long>(kv16), static_cast<long long>(kv.num_layers),
              static_cast<long long>(kv.num_kv_heads), static_cast<long long>(kv.head_dim));
  std::printf("kv cache, full ctx: %.1f MiB per sequence of %lld tokens at 16-bit\n",
              kv16 * hp.context_length / 1048576.0, static_cast<long long>(hp.context_length));
  if (flags.GetSwitch("fingerprint")) {
    std::printf("fingerprint:        %s\n", model::CachedModelFingerprint(*model, DefaultCacheDir()).c_str());
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
