#include "model/tokenizer/chat_encoding.h"

#include "common/status_macros.h"

namespace kvfleet::model {

absl::StatusOr<std::vector<TokenId>> EncodeChat(const Tokenizer& tokenizer, const ChatTemplate& chat, bool add_bos,
                                                std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ChatInputs inputs;
  inputs.messages = ChatMessagesToJson(messages);
  inputs.add_generation_prompt = add_generation_prompt;
  return EncodeChat(tokenizer, chat, add_bos, inputs);
}

absl::StatusOr<std::vector<TokenId>> EncodeChat(const Tokenizer& tokenizer, const ChatTemplate& chat, bool add_bos,
                                                const ChatInputs& inputs) {
  ASSIGN_OR_RETURN(std::vector<ChatPiece> pieces, chat.Render(inputs));
  const bool renders_bos = !pieces.empty() && pieces[0].is_marker && !chat.bos_token().empty() &&
                           pieces[0].text == chat.bos_token();
  std::vector<TokenId> ids;
  if (add_bos && !renders_bos && tokenizer.bos().has_value()) ids.push_back(*tokenizer.bos());
  for (const ChatPiece& piece : pieces) {
    ASSIGN_OR_RETURN(std::vector<TokenId> piece_ids, tokenizer.Encode(piece.text, {.parse_special = piece.is_marker}));
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  return ids;
}

}  // namespace kvfleet::model
