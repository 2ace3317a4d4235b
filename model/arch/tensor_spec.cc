#include "model/arch/tensor_spec.h"

namespace kvfleet::model {

int64_t DimSize(Dim d, const ModelConfig& c) {
  switch (d) {
    case Dim::kOne:
      return 1;
    case Dim::kVocab:
      return c.vocab_size;
    case Dim::kHidden:
      return c.hidden_size;
    case Dim::kFfn:
      return c.ffn_size;
    case Dim::kQ:
      return c.num_heads * c.head_dim;
    case Dim::kKv:
      return c.num_kv_heads * c.head_dim;
    case Dim::kHeadDim:
      return c.head_dim;
    case Dim::kQkv:
      return (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
    case Dim::kGateUp:
      return 2 * c.ffn_size;
  }
  return 0;
}

}  // namespace kvfleet::model
