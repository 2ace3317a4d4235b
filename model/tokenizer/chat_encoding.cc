#include "model/tokenizer/chat_encoding.h"

#include "common/status_macros.h"

namespace kvfleet::model {

absl::StatusOr<std::vector<TokenId>> EncodeChat(const Tokenizer& tokenizer, const ChatTemplate& chat, bool add_bos,
                                                std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ASSIGN_OR_RETURN(std::vector<ChatPiece> pieces, chat.Render(messages, add_generation_prompt));
  std::vector<TokenId> ids;
  if (add_bos && !chat.renders_bos() && tokenizer.bos().has_value()) ids.push_back(*tokenizer.bos());
  for (const ChatPiece& piece : pieces) {
    ASSIGN_OR_RETURN(std::vector<TokenId> piece_ids, tokenizer.Encode(piece.text, {.parse_special = piece.is_marker}));
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  return ids;
}

}  // namespace kvfleet::model
