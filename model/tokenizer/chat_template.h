// Chat templates: turning a list of messages into the prompt text a model
// was trained on, without a Jinja interpreter.
//
// A model's template (tokenizer.chat_template, Jinja source) is recognised
// by family and rendered by code that produces exactly what Jinja (with
// Hugging Face's trim_blocks/lstrip_blocks settings) renders from it:
//   - ChatML ("<|im_start|>"): SmolLM2, Qwen2, ...
//       <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
//   - Llama 3 ("<|start_header_id|>"):
//       {bos}<|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|> ...
// A default system prompt that the template hard-codes (SmolLM2: "You are a
// helpful AI assistant named SmolLM, trained by Hugging Face") is found in
// the source and inserted when the first message is not a system message,
// as the template does. A template of another family, or one using
// features this renderer does not reproduce (tool calls, reasoning blocks,
// Llama 3.1's date preamble), is refused with a status that says so; there
// is no fallback guess.
//
// Thread-safety: immutable after creation.
//
//   ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::FromVocabulary(vocab));
//   ASSIGN_OR_RETURN(std::string prompt, chat.Apply(messages, /*add_generation_prompt=*/true));
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
};

// One piece of a rendered chat: a special-token text the template itself
// writes (a marker such as "<|im_start|>", or the BOS text), or plain text
// (role names, newlines, message content).
struct ChatPiece {
  std::string text;
  bool is_marker = false;
};

struct ChatTemplateOptions {
  // The texts the template's bos_token / eos_token variables stand for.
  std::string bos_token;
  std::string eos_token;
};

class ChatTemplate {
 public:
  enum class Family { kChatMl, kLlama3 };

  // INVALID_ARGUMENT for an empty or unrecognised template, UNIMPLEMENTED
  // for a recognised family with features outside this renderer; both name
  // the supported families.
  static absl::StatusOr<ChatTemplate> FromTemplateSource(std::string_view jinja_source,
                                                         const ChatTemplateOptions& options = {});
  // The vocabulary's chat_template, with its BOS/EOS texts.
  static absl::StatusOr<ChatTemplate> FromVocabulary(const Vocabulary& vocab);

  // INVALID_ARGUMENT for no messages, an unknown role, or content that is
  // not valid UTF-8. The result holds special-token texts (and the BOS text
  // when the template emits it): encode it with parse_special and without
  // add_special.
  absl::StatusOr<std::string> Apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  // The same rendering as pieces, so that only the template's own markers
  // become control tokens: a message whose content contains "<|im_end|>"
  // must not be able to close its turn (EncodeChat in chat_encoding.h).
  // Concatenating the pieces' texts gives Apply's result.
  absl::StatusOr<std::vector<ChatPiece>> Render(std::span<const ChatMessage> messages,
                                                bool add_generation_prompt) const;

  Family family() const { return family_; }
  std::string_view family_name() const;
  const std::optional<std::string>& default_system_prompt() const { return default_system_prompt_; }
  // Whether Apply's output starts with the BOS text.
  bool renders_bos() const { return renders_bos_; }

 private:
  ChatTemplate() = default;
  void AppendMessage(std::string_view role, std::string_view content, std::vector<ChatPiece>* out) const;

  Family family_ = Family::kChatMl;
  std::optional<std::string> default_system_prompt_;
  std::string bos_token_;
  bool renders_bos_ = false;
  bool trims_content_ = false;
  bool has_tool_format_ = false;  // the template renders "tool" turns its own way
};

}  // namespace kvfleet::model
