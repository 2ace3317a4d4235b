// Teacher-forced evaluation's windows, by llama.cpp's perplexity rule: the
// tokens cut into consecutive windows of `context` tokens (what is left
// after the last whole window is not scored); each window runs on its own
// from an empty cache, its first token replaced by BOS when the model has
// one; within a window, the logits at positions first_scored ..
// length − 2 predict the next token of the window. first_scored is
// context / 2, so every scored position sees at least half a window.
//
//   for (const EvalWindow& w : EvalWindows(tokens.size(), 512)) ...
#pragma once

#include <cstdint>
#include <vector>

namespace kvfleet::tools {

struct EvalWindow {
  int64_t start = 0;         // its first token's index in the text
  int64_t length = 0;        // tokens it runs
  int64_t first_scored = 0;  // the first position whose logits are scored (window-relative)
  int64_t scored() const { return length - 1 - first_scored; }
};

// Empty when fewer than `context` tokens (context ≥ 4).
std::vector<EvalWindow> EvalWindows(int64_t num_tokens, int64_t context);

}  // namespace kvfleet::tools
