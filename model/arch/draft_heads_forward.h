// Draft heads (Medusa-1 on a frozen target) as a forward pass over the op
// set, written once for every backend: K residual blocks on the target's
// last hidden state h (after its final norm, the output head's input),
// head i guessing the token i + 2 places ahead, then the target's own
// output head restricted to the draft vocabulary:
//
//   h_i = h + SiLU(W_i · h + b_i),   logits_i = E · h_i
//
// The executor holds the weights where its kernels read them (the device
// on a GPU) and runs this on the hidden rows a step returned.
#pragma once

#include <cstdint>
#include <vector>

#include "model/arch/decoder_weights.h"
#include "model/arch/op_set.h"

namespace kvfleet::model {

struct DraftHeadWeights {
  struct Head {
    WeightView weight;  // [H, H], in the file's float type
    WeightView bias;    // [H], float32
  };
  std::vector<Head> heads;
  // [draft vocabulary, H]: the target's output head rows of the draft
  // vocabulary, in the head's storage type (the same arithmetic as the
  // target's own logits for those tokens).
  WeightView vocab_head;

  int64_t hidden_size() const { return vocab_head.cols; }
  int64_t vocab_size() const { return vocab_head.rows; }
  int64_t bytes() const {
    int64_t b = vocab_head.bytes();
    for (const Head& h : heads) b += h.weight.bytes() + h.bias.bytes();
    return b;
  }
};

// The first `num_heads` heads on `rows` hidden states: states
// [num_heads, rows, H] (scratch), logits [num_heads, rows, draft vocabulary].
template <OpSet Ops>
void DraftHeadsForward(Ops& ops, const DraftHeadWeights& w, int32_t num_heads, int64_t rows, const float* hidden,
                       float* states, float* logits) {
  const int64_t h = w.hidden_size();
  for (int32_t i = 0; i < num_heads; ++i) {
    float* s = states + i * rows * h;
    ops.MatMul(w.heads[static_cast<size_t>(i)].weight, hidden, rows, s);
    ops.AddBias(s, w.heads[static_cast<size_t>(i)].bias.f32(), rows, h);
    ops.Silu(s, s, rows * h);
    ops.Add(s, hidden, rows * h);
    ops.MatMul(w.vocab_head, s, rows, logits + i * rows * w.vocab_size());
  }
}

}  // namespace kvfleet::model
