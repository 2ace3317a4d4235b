// Whether two models share one tokenizer, as a draft model and its target
// must: a draft proposes token ids, and the target reads them as its own,
// so an id has to mean the same text in both. Vocabulary sizes alone do
// not show it (fine-tunes add tokens in place of others; families of one
// size differ in their merges).
//
// Compared: the tokenizer kind and pre-tokenizer, every token's text, the
// merge list, and the special ids (bos, eos, eot, unk, pad). Not compared:
// scores, token types and the chat template, which do not change what an
// id means.
//
//   RETURN_IF_ERROR(SameTokenizer(target.vocabulary(), draft.vocabulary()));
#pragma once

#include "absl/status/status.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

// OK, or INVALID_ARGUMENT naming the first difference ("token 1234 is
// \"foo\" in the first and \"bar\" in the second").
absl::Status SameTokenizer(const Vocabulary& first, const Vocabulary& second);

}  // namespace kvfleet::model
