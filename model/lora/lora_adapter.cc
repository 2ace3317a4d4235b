#include "model/lora/lora_adapter.h"

#include <algorithm>

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

namespace {

void MoveHeadRows(std::vector<float>& b, int64_t head_dim, int64_t rank, bool to_adjacent) {
  const int64_t rows = static_cast<int64_t>(b.size()) / rank, half = head_dim / 2;
  std::vector<float> out(b.size());
  for (int64_t h = 0; h < rows / head_dim; ++h) {
    for (int64_t j = 0; j < half; ++j) {
      for (int64_t k = 0; k < 2; ++k) {
        const int64_t checkpoint = h * head_dim + k * half + j, adjacent = h * head_dim + 2 * j + k;
        const int64_t from = to_adjacent ? checkpoint : adjacent, to = to_adjacent ? adjacent : checkpoint;
        std::copy(b.begin() + from * rank, b.begin() + (from + 1) * rank, out.begin() + to * rank);
      }
    }
  }
  b = std::move(out);
}

}  // namespace

void ToAdjacentPairOrder(std::vector<float>& b, int64_t head_dim, int64_t rank) {
  MoveHeadRows(b, head_dim, rank, true);
}

void FromAdjacentPairOrder(std::vector<float>& b, int64_t head_dim, int64_t rank) {
  MoveHeadRows(b, head_dim, rank, false);
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
