// Splits a model's streamed output into reasoning and answer, for models
// that think between tags (Qwen3, QwQ, DeepSeek-R1: "<think> ... </think>").
// The reasoning goes back as `reasoning_content`, the rest as `content`, as
// vLLM's reasoning parsers return them. A tag split across deltas is held
// back until it is whole, so neither channel ever shows part of one.
//
// Some templates open the block in the prompt (DeepSeek-R1's generation
// prompt ends in "<think>\n"): then the output starts inside it. Otherwise
// reasoning starts only if the output opens with the start tag (after
// whitespace); output that does not is all answer.
//
// Thread-safety: one per stream.
//
//   ReasoningParser p("<think>", "</think>", /*starts_inside=*/false);
//   SplitText s = p.Push(delta);  // s.reasoning, s.content
#pragma once

#include <string>
#include <string_view>

namespace kvfleet::router::chat {

struct SplitText {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  ReasoningParser(std::string start_tag, std::string end_tag, bool starts_inside);

  SplitText Push(std::string_view text);
  // The end of the output: what was held back.
  SplitText Finish();

 private:
  enum class State { kBeforeAny, kReasoning, kContent };

  std::string start_tag_;
  std::string end_tag_;
  State state_;
  std::string pending_;  // held back: a possible start of a tag
};

// How many bytes at the end of `text` are a proper prefix of `tag` (what a
// stream must hold back until the next delta says whether the tag follows).
size_t PartialTagSuffix(std::string_view text, std::string_view tag);

}  // namespace kvfleet::router::chat
