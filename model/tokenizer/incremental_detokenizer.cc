#include "model/tokenizer/incremental_detokenizer.h"

#include "common/status_macros.h"
#include "model/tokenizer/utf8.h"

namespace kvfleet::model {

absl::StatusOr<std::string> IncrementalDetokenizer::Push(TokenId id) {
  std::string bytes = pending_;
  RETURN_IF_ERROR(tokenizer_.AppendDecoded(id, options_, &state_, &bytes));
  std::string delta;
  delta.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Unit unit = ScanUtf8(bytes, pos);
    if (unit.kind == Utf8Unit::kIncomplete) break;  // only ever at the end
    if (unit.kind == Utf8Unit::kValid) {
      delta.append(bytes, pos, unit.length);
    } else {
      delta.append(kReplacementCharacter);
    }
    pos += unit.length;
  }
  pending_ = bytes.substr(pos);
  return delta;
}

std::string IncrementalDetokenizer::Finish() {
  std::string rest;
  // Whatever is held is a valid but unfinished prefix: one U+FFFD, as a
  // decoder with errors="replace" shows a truncated character.
  if (!pending_.empty()) rest.append(kReplacementCharacter);
  pending_.clear();
  return rest;
}

}  // namespace kvfleet::model
