#include "services/router/chat/reasoning_parser.h"

#include <algorithm>

namespace kvfleet::router::chat {

size_t PartialTagSuffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

ReasoningParser::ReasoningParser(std::string start_tag, std::string end_tag, bool starts_inside)
    : start_tag_(std::move(start_tag)),
      end_tag_(std::move(end_tag)),
      state_(starts_inside ? State::kReasoning : State::kBeforeAny) {}

SplitText ReasoningParser::Push(std::string_view text) {
  pending_.append(text);
  SplitText out;
  while (!pending_.empty()) {
    if (state_ == State::kContent) {
      out.content += pending_;
      pending_.clear();
    } else if (state_ == State::kBeforeAny) {
      const size_t first = pending_.find_first_not_of(" \t\r\n");
      if (first == std::string::npos) break;  // only whitespace so far: wait
      std::string_view rest = std::string_view(pending_).substr(first);
      if (rest.substr(0, start_tag_.size()) == start_tag_) {
        pending_.erase(0, first + start_tag_.size());
        state_ = State::kReasoning;
      } else if (std::string_view(start_tag_).substr(0, rest.size()) == rest) {
        break;  // a start tag in the making
      } else {
        state_ = State::kContent;
      }
    } else {
      const size_t end = pending_.find(end_tag_);
      if (end != std::string::npos) {
        out.reasoning.append(pending_, 0, end);
        pending_.erase(0, end + end_tag_.size());
        state_ = State::kContent;
        continue;
      }
      const size_t hold = PartialTagSuffix(pending_, end_tag_);
      out.reasoning.append(pending_, 0, pending_.size() - hold);
      pending_.erase(0, pending_.size() - hold);
      break;
    }
  }
  return out;
}

SplitText ReasoningParser::Finish() {
  SplitText out;
  (state_ == State::kReasoning ? out.reasoning : out.content) = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvfleet::router::chat
