#include "model/lora/lora_adapter.h"

namespace kvfleet::model {

std::string_view LoraTargetModule(LoraTarget target) {
  switch (target) {
    case LoraTarget::kAttnQ:
      return "q_proj";
    case LoraTarget::kAttnK:
      return "k_proj";
    case LoraTarget::kAttnV:
      return "v_proj";
    case LoraTarget::kAttnOutput:
      return "o_proj";
    case LoraTarget::kFfnGate:
      return "gate_proj";
    case LoraTarget::kFfnUp:
      return "up_proj";
    case LoraTarget::kFfnDown:
      return "down_proj";
  }
  return "";
}

int64_t LoraAdapter::parameters() const {
  int64_t n = 0;
  for (const auto& layer : layers) {
    for (const std::optional<LoraPair>& p : layer) {
      if (p.has_value()) n += static_cast<int64_t>(p->a.size() + p->b.size());
    }
  }
  return n;
}

}  // namespace kvfleet::model
