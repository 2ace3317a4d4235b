// What a teacher-forced evaluation reports, accumulated position by
// position in double:
//   - perplexity exp(mean NLL) of the text's next tokens, with its standard
//     error (llama.cpp's: exp(mean) × the standard error of the NLL's mean);
//   - against a reference distribution at the same positions: the KL
//     divergence KL(reference ‖ evaluated) (mean, median, p99, max), the
//     share of positions whose top token is the same, and the RMS of the
//     change in the probability of the text's next token.
//
//   PerplexityStats ppl;
//   ppl.Add(NextTokenNll(log_probs, next));
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/token_id.h"

namespace kvfleet::tools {

// log-softmax of one row of logits, in double.
std::vector<double> LogSoftmax(std::span<const float> logits);

class PerplexityStats {
 public:
  void Add(double nll);
  int64_t count() const { return count_; }
  double perplexity() const;
  double perplexity_stderr() const;  // 0 with fewer than two positions

 private:
  int64_t count_ = 0;
  double sum_ = 0.0, sum_squares_ = 0.0;
};

struct DivergenceSummary {
  int64_t positions = 0;
  double mean_kl = 0, median_kl = 0, p99_kl = 0, max_kl = 0;
  double same_top1 = 0;  // share of positions
  double rms_delta_p = 0;
};

class DivergenceStats {
 public:
  // One position: both distributions as log-probabilities over the same
  // vocabulary, and the text's next token.
  void Add(std::span<const double> reference, std::span<const double> evaluated, model::TokenId next);
  DivergenceSummary Summary() const;

 private:
  std::vector<double> kl_;
  int64_t same_top1_ = 0;
  double sum_delta_p2_ = 0.0;
};

}  // namespace kvfleet::tools
