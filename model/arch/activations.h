// One forward pass's activations in the backend's memory, each sized once
// for an executor's limits (T = max batch tokens, R = max logits rows), and
// what a pass computes (ForwardStep). Every architecture's layer sequence
// runs over these buffers.
//
//   ActivationSizes sizes = ActivationSizes::For(config, T, R);
//   Activations a = sizes.Carve(base);   // base: sizes.total() floats
#pragma once

#include <cstdint>

#include "model/arch/model_config.h"

namespace kvfleet::model {

// What one forward pass computes.
struct ForwardStep {
  int64_t num_tokens = 0;
  int64_t num_layers = 0;       // the first L layers (fewer than the model's: self-speculative drafting)
  int64_t num_logits_rows = 0;  // rows the ops' Logits projects (0: none)
};

struct Activations {
  float* x = nullptr;          // [T, hidden] the residual stream
  float* xn = nullptr;         // [T, hidden] normed
  float* q = nullptr;          // [T, heads × head_dim]
  float* k = nullptr;          // [T, kv_heads × head_dim]
  float* v = nullptr;          // [T, kv_heads × head_dim]
  float* attn = nullptr;       // [T, heads × head_dim]
  float* proj = nullptr;       // [T, hidden]
  float* gate = nullptr;       // [T, ffn]
  float* up = nullptr;         // [T, ffn]
  float* logits_in = nullptr;  // [R, hidden] the rows that want logits
  float* logits = nullptr;     // [R, vocab]
};

// How many floats each activation above needs.
struct ActivationSizes {
  int64_t x, q, kv, ffn, logits_in, logits;

  static ActivationSizes For(const ModelConfig& c, int64_t max_tokens, int64_t max_logits_rows) {
    return {.x = max_tokens * c.hidden_size,
            .q = max_tokens * c.num_heads * c.head_dim,
            .kv = max_tokens * c.num_kv_heads * c.head_dim,
            .ffn = max_tokens * c.ffn_size,
            .logits_in = max_logits_rows * c.hidden_size,
            .logits = max_logits_rows * c.vocab_size};
  }
  int64_t total() const { return 3 * x + 2 * q + 2 * kv + 2 * ffn + logits_in + logits; }

  // The activations laid out one after another from `base` (total() floats);
  // every buffer starts 16-byte aligned when base is and the widths are
  // multiples of 4, as the models' are.
  Activations Carve(float* base) const {
    float* p = base;
    const auto take = [&p](int64_t n) {
      float* at = p;
      p += n;
      return at;
    };
    return {.x = take(x),
            .xn = take(x),
            .q = take(q),
            .k = take(kv),
            .v = take(kv),
            .attn = take(q),
            .proj = take(x),
            .gate = take(ffn),
            .up = take(ffn),
            .logits_in = take(logits_in),
            .logits = take(logits)};
  }
};

}  // namespace kvfleet::model
