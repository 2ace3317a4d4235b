// A LoRA adapter as kvfleet holds it: for each adapted projection of each
// layer, the pair (A, B) whose product, scaled, is the adapter's change to
// that projection's weights: W' = W + scale · B·A, with A [rank, in] and
// B [out, rank] in float32 whatever the file stored. Only the seven matrices
// a token multiplies through in a layer can be adapted (the attention's
// q, k, v and output projections, the feed-forward's gate, up and down);
// embeddings and the output head never are.
//
// The identity is the name and a digest of the adapter's files: block
// hashes are salted with both, so the same name with new weights never
// shares KV with the old.
//
//   ASSIGN_OR_RETURN(LoraAdapter a, ReadPeftAdapter(dir, "sql", base, {.max_rank = 16}));
//   if (const LoraPair* q = a.Pair(layer, LoraTarget::kAttnQ)) ...
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/arch/decoder_weights.h"

namespace kvfleet::model {

// The projections an adapter may change: a layer's seven matrices.
using LoraTarget = Projection;
inline constexpr int kLoraTargets = kProjections;

// The Hugging Face module name of a target ("q_proj", ..., "down_proj").
std::string_view LoraTargetModule(LoraTarget target);

struct LoraPair {
  int64_t in = 0;        // the projection's input width (its weight's columns)
  int64_t out = 0;       // its output width (rows)
  std::vector<float> a;  // [rank, in], row-major
  std::vector<float> b;  // [out, rank], row-major
};

struct LoraAdapter {
  std::string name;
  std::string digest;  // SHA-256 of its config and weight files, lowercase hex
  int32_t rank = 0;
  double alpha = 0;
  bool rslora = false;  // scale = alpha / sqrt(rank) instead of alpha / rank
  double scale = 0;
  // Per layer, per target; nullopt where the adapter leaves it alone.
  std::vector<std::array<std::optional<LoraPair>, kLoraTargets>> layers;

  const LoraPair* Pair(int64_t layer, LoraTarget target) const {
    const std::optional<LoraPair>& p = layers.at(static_cast<size_t>(layer))[static_cast<size_t>(target)];
    return p.has_value() ? &*p : nullptr;
  }
  // What block hashes are salted with: "name@digest".
  std::string identity() const { return name + "@" + digest; }
  // Float32 values it holds (what it costs resident: 4 bytes each).
  int64_t parameters() const;
};

// A GGUF Llama's Wq and Wk rows were permuted by its converter for
// adjacent-pair RoPE (in each head, the rows of its two halves
// interleaved); PEFT trains against the checkpoint's order. These move an
// adapter's B rows (`rank` values each) of q_proj or k_proj between the
// two orders: row 2j + k of a head is row k·head_dim/2 + j of the
// checkpoint's.
void ToAdjacentPairOrder(std::vector<float>& b, int64_t head_dim, int64_t rank);
void FromAdjacentPairOrder(std::vector<float>& b, int64_t head_dim, int64_t rank);

}  // namespace kvfleet::model
