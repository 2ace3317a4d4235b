#include "services/router/frontend/text_stream.h"

#include "common/status_macros.h"

namespace kvfleet::router {

absl::StatusOr<TextStream> TextStream::Create(const model::Tokenizer& tokenizer, std::vector<std::string> stops) {
  ASSIGN_OR_RETURN(model::StopStringMatcher matcher, model::StopStringMatcher::Create(std::move(stops)));
  return TextStream(tokenizer, std::move(matcher));
}

absl::StatusOr<std::string> TextStream::Push(model::TokenId id) {
  if (stops_.stopped()) return std::string();
  ASSIGN_OR_RETURN(std::string delta, detokenizer_.Push(id));
  return stops_.Push(delta);
}

std::string TextStream::Finish() {
  if (stops_.stopped()) return std::string();
  return stops_.Push(detokenizer_.Finish()) + stops_.Finish();
}

}  // namespace kvfleet::router
