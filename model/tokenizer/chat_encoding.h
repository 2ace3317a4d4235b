// A chat turned into prompt token ids: the template's rendering, with only
// the template's own markers (<|im_start|>, <|eot_id|>, the BOS text, ...)
// becoming control tokens. Marker texts inside a message's content stay
// plain text, so a user cannot close their turn and write the assistant's
// or the system's (Hugging Face's apply_chat_template + encode, and vLLM,
// parse them wherever they appear). For content without marker texts the
// ids equal encoding the rendered text with parse_special: the text between
// markers is encoded the same way in both.
//
//   ASSIGN_OR_RETURN(std::vector<TokenId> ids, EncodeChat(tok, chat, vocab.add_bos, messages, true));
#pragma once

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "model/token_id.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"

namespace kvfleet::model {

// `add_bos`: the vocabulary asks for BOS (Vocabulary::add_bos); it is
// prepended unless the rendering starts with the template's own BOS text.
// Errors are the template's (ChatTemplate::Render) and the tokenizer's.
absl::StatusOr<std::vector<TokenId>> EncodeChat(const Tokenizer& tokenizer, const ChatTemplate& chat, bool add_bos,
                                                const ChatInputs& inputs);
absl::StatusOr<std::vector<TokenId>> EncodeChat(const Tokenizer& tokenizer, const ChatTemplate& chat, bool add_bos,
                                                std::span<const ChatMessage> messages, bool add_generation_prompt);

}  // namespace kvfleet::model
