#include "tools/eval/eval_windows.h"

namespace kvfleet::tools {

std::vector<EvalWindow> EvalWindows(int64_t num_tokens, int64_t context) {
  std::vector<EvalWindow> out;
  if (context < 4) return out;
  for (int64_t start = 0; start + context <= num_tokens; start += context) {
    out.push_back({.start = start, .length = context, .first_scored = context / 2});
  }
  return out;
}

}  // namespace kvfleet::tools
