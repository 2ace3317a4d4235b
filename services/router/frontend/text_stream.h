// One generation's text as the client sees it: token ids in, text deltas
// out, detokenized incrementally (whole UTF-8 characters only, special
// tokens left out) and cut at the first stop string. It lives in the router,
// not the worker, so it survives a failover: the tokens a second worker
// produces continue the same text with no gap and no duplicate.
//
// Thread-safety: one per stream; not thread-safe. The tokenizer must
// outlive it.
//
//   ASSIGN_OR_RETURN(TextStream text, TextStream::Create(model.tokenizer(), {"\n\n"}));
//   ASSIGN_OR_RETURN(std::string delta, text.Push(id));  // check text.stopped() after each token
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer/incremental_detokenizer.h"
#include "model/tokenizer/stop_string_matcher.h"
#include "model/tokenizer/tokenizer.h"

namespace kvfleet::router {

class TextStream {
 public:
  // INVALID_ARGUMENT for stop strings the matcher refuses (too many, empty,
  // too long), naming the limit.
  static absl::StatusOr<TextStream> Create(const model::Tokenizer& tokenizer, std::vector<std::string> stops);

  // The text token `id` makes safe to send. Once a stop string has matched,
  // returns "" for every further token.
  absl::StatusOr<std::string> Push(model::TokenId id);
  // The end of the generation: whatever was held back ("" after a stop).
  std::string Finish();

  bool stopped() const { return stops_.stopped(); }

 private:
  TextStream(const model::Tokenizer& tokenizer, model::StopStringMatcher stops)
      : detokenizer_(tokenizer, {.skip_special = true}), stops_(std::move(stops)) {}

  model::IncrementalDetokenizer detokenizer_;
  model::StopStringMatcher stops_;
};

}  // namespace kvfleet::router
