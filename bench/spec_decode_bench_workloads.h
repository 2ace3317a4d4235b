// The prompts of spec_decode_bench: structured work, where the answer
// reuses the prompt's text (extraction, code completion, document editing);
// code work on a given function (type hints, a bug fix, unit tests, a
// translation), where the answer quotes the code; and open chat, where it
// does not.
#pragma once

#include <string>
#include <vector>

namespace kvfleet::bench {

struct SpecWorkload {
  std::string name;
  std::vector<std::string> prompts;  // user messages, rendered through the chat template
};

std::vector<SpecWorkload> SpecWorkloads();

}  // namespace kvfleet::bench
