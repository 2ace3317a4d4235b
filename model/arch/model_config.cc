#include "model/arch/model_config.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace kvfleet::model {

int64_t ModelConfig::max_window() const {
  int64_t w = 0;
  for (const LayerAttention& l : layers) w = std::max(w, l.window);
  return w;
}

int64_t ModelConfig::windowed_layers() const {
  return std::count_if(layers.begin(), layers.end(), [](const LayerAttention& l) { return l.window > 0; });
}

absl::Status ModelConfig::Validate(const std::string& origin) const {
  const auto bad = [&](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat(origin, ": ", what)); };
  // Per-thread attention scratch is sized by the context at start.
  constexpr int64_t kMaxContext = int64_t{1} << 24;
  for (const auto& [field, v] : {std::pair<const char*, int64_t>{"vocab_size", vocab_size},
                                 {"context_length", context_length},
                                 {"hidden_size", hidden_size},
                                 {"ffn_size", ffn_size},
                                 {"num_layers", num_layers},
                                 {"num_heads", num_heads},
                                 {"num_kv_heads", num_kv_heads},
                                 {"head_dim", head_dim}}) {
    if (v <= 0 || v > (int64_t{1} << 31)) return bad(absl::StrCat(field, " = ", v, " is out of range"));
  }
  if (context_length > kMaxContext) {
    return bad(absl::StrCat("context length ", context_length, " is over kvfleet's limit of ", kMaxContext,
                            " tokens"));
  }
  if (num_heads % num_kv_heads != 0) {
    return bad(absl::StrCat(num_heads, " attention heads are not a multiple of ", num_kv_heads, " KV heads"));
  }
  if (head_dim % 8 != 0) return bad(absl::StrCat("head dimension ", head_dim, " is not a multiple of 8"));
  if (hidden_size % 8 != 0) return bad(absl::StrCat("hidden size ", hidden_size, " is not a multiple of 8"));
  if (!(rms_norm_eps > 0.0 && rms_norm_eps < 1.0)) return bad(absl::StrCat("RMSNorm epsilon ", rms_norm_eps));
  if (!(attention_scale > 0.0f)) return bad("the attention scale must be positive");
  if (!(embedding_scale > 0.0f)) return bad("the embedding scale must be positive");
  if (ropes.empty()) return bad("no RoPE configuration");
  for (const RopeConfig& r : ropes) {
    if (r.dim <= 0 || r.dim > head_dim || r.dim % 2 != 0) {
      return bad(absl::StrCat("RoPE dimension ", r.dim, " must be even and at most the head dimension ", head_dim));
    }
    if (!(r.theta > 1.0)) return bad(absl::StrCat("RoPE base ", r.theta, " must be greater than 1"));
    if (!(r.position_scale > 0.0)) return bad("the RoPE position scale must be positive");
    for (const std::vector<float>* f : {&r.freq_factors, &r.long_freq_factors}) {
      if (!f->empty() && static_cast<int64_t>(f->size()) != r.dim / 2) {
        return bad(absl::StrCat("RoPE frequency factors: ", f->size(), " for ", r.dim / 2, " pairs"));
      }
      for (float x : *f) {
        if (!(x > 0.0f) || !std::isfinite(x)) return bad(absl::StrCat("RoPE frequency factor ", x, " is not positive"));
      }
    }
    if (!r.long_freq_factors.empty() && r.freq_factors.empty()) return bad("long RoPE factors without short ones");
    if (!(r.magnitude > 0.0) || !std::isfinite(r.magnitude)) {
      return bad(absl::StrCat("RoPE magnitude ", r.magnitude, " must be positive"));
    }
  }
  if (static_cast<int64_t>(layers.size()) != num_layers) {
    return bad(absl::StrCat(layers.size(), " layer attention entries for ", num_layers, " layers"));
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].window < 0) return bad(absl::StrCat("layer ", l, ": negative attention window"));
    if (layers[l].rope < 0 || layers[l].rope >= static_cast<int32_t>(ropes.size())) {
      return bad(absl::StrCat("layer ", l, ": RoPE index ", layers[l].rope, " of ", ropes.size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::model
