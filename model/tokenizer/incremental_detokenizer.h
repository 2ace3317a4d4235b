// Turns a stream of generated token ids into text deltas that are safe to
// send to a client as they come: each delta holds only whole UTF-8
// characters. A character split over several byte tokens (an emoji is often
// four <0xXX> or byte-level tokens) is held back until its last byte
// arrives. Bytes that can never become a character (a stray continuation
// byte, a lead byte followed by a non-continuation) are sent as U+FFFD as
// soon as they are known to be invalid, so a bad token never stalls the
// stream.
//
// Invariant: for ids whose Decode is valid UTF-8, the concatenation of all
// Push results and Finish equals Decode(ids) with the same options.
//
// Thread-safety: one detokenizer per stream; not thread-safe. The Tokenizer
// must outlive it.
//
//   IncrementalDetokenizer detok(*tokenizer, {.skip_special = true});
//   ASSIGN_OR_RETURN(std::string delta, detok.Push(id));  // may be ""
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "model/tokenizer/tokenizer.h"

namespace kvfleet::model {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, DecodeOptions options = {})
      : tokenizer_(tokenizer), options_(options) {}

  // The text that token `id` completes; INVALID_ARGUMENT for an id outside
  // the vocabulary (the stream's state is unchanged then).
  absl::StatusOr<std::string> Push(TokenId id);

  // What is still held back, with an unfinished character as U+FFFD; the
  // detokenizer is empty afterwards.
  std::string Finish();

  // Bytes held back waiting for the rest of a character (at most 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  DecodeState state_;
  std::string pending_;
};

}  // namespace kvfleet::model
