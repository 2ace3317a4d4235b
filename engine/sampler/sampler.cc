#include "engine/sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/sampler/argmax.h"
#include "engine/sampler/philox.h"

namespace kvfleet::engine {

Sampler::Sampler(const SamplingParams& params, uint64_t seed, std::span<const model::TokenId> prompt)
    : params_(params), seed_(seed) {
  if (params_.repetition_penalty != 1.0f) prompt_tokens_.insert(prompt.begin(), prompt.end());
}

void Sampler::Accept(model::TokenId token) { ++output_counts_[token]; }

void Sampler::AdjustLogits(std::span<float> logits) const {
  for (const auto& [token, bias] : params_.logit_bias) {
    if (token >= 0 && static_cast<size_t>(token) < logits.size()) logits[token] += bias;
  }
  const float rep = params_.repetition_penalty;
  auto penalize_repeat = [&](model::TokenId t) {
    float& l = logits[t];
    l = l > 0.0f ? l / rep : l * rep;
  };
  if (rep != 1.0f) {
    for (model::TokenId t : prompt_tokens_) penalize_repeat(t);
    for (const auto& [t, n] : output_counts_) {
      if (!prompt_tokens_.contains(t)) penalize_repeat(t);
    }
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    for (const auto& [t, n] : output_counts_) {
      logits[t] -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(n);
    }
  }
  if (!params_.greedy()) {
    for (float& l : logits) l /= params_.temperature;
  }
}

bool Sampler::AdjustsLogits() const {
  return !params_.greedy() || !params_.logit_bias.empty() || params_.repetition_penalty != 1.0f ||
         params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
}

model::TokenId Sampler::Sample(std::span<const float> raw_logits, int64_t position) const {
  // Plain greedy decoding reads the row where it is: copying a large
  // vocabulary's logits cost as much as choosing from them.
  if (!AdjustsLogits()) return Argmax(raw_logits);
  std::vector<float> logits(raw_logits.begin(), raw_logits.end());
  AdjustLogits(logits);
  if (params_.greedy()) return Argmax(logits);  // ties go to the lowest id

  // Candidates in a total order (logit descending, id ascending) so the
  // draw is deterministic.
  std::vector<model::TokenId> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto before = [&](model::TokenId a, model::TokenId b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  size_t keep = ids.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), before);
    ids.resize(keep);
  } else {
    std::sort(ids.begin(), ids.end(), before);
  }

  // Softmax over the kept candidates, in sorted order.
  const float max_logit = logits[ids[0]];
  std::vector<double> probs(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp(static_cast<double>(logits[ids[i]] - max_logit));
    total += probs[i];
  }
  // top-p: the smallest prefix whose mass reaches top_p (always at least one).
  if (params_.top_p < 1.0f) {
    double mass = 0.0;
    size_t n = 0;
    while (n < keep) {
      mass += probs[n++] / total;
      if (mass >= params_.top_p) break;
    }
    keep = n;
  }
  // min-p: drop candidates below min_p × the top probability.
  if (params_.min_p > 0.0f) {
    const double floor = params_.min_p * probs[0];
    size_t n = 1;
    while (n < keep && probs[n] >= floor) ++n;
    keep = n;
  }
  double kept_total = 0.0;
  for (size_t i = 0; i < keep; ++i) kept_total += probs[i];

  const double u = UniformAt(seed_, static_cast<uint64_t>(position), 0) * kept_total;
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += probs[i];
    if (u < cumulative) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace kvfleet::engine
