// Chat templates: turning a conversation into the prompt text a model was
// trained on, by rendering the model's own template (tokenizer.chat_template,
// Jinja source) as Hugging Face's apply_chat_template does (model/jinja/).
//
// The template sees what Hugging Face passes it: `messages` (OpenAI-shaped:
// role, content, tool_calls, tool_call_id, ...), `tools` (None when there
// are none), `documents` (None), `add_generation_prompt`, the vocabulary's
// `bos_token` and `eos_token`, and the caller's extra variables
// (chat_template_kwargs: enable_thinking, ...).
//
// Rendering yields pieces: a control-token text the template itself wrote
// (a marker such as "<|im_start|>") or plain text. The same text inside a
// message, a tool description or a kwarg stays plain text, so a user cannot
// close their turn and write the assistant's (chat_encoding.h).
//
// Errors: a template jinja2 cannot compile fails to load; rendering fails
// where jinja2 raises (a template's raise_exception("Conversation roles must
// alternate ..."), an undefined value used in arithmetic, ...). Both are
// INVALID_ARGUMENT naming the template and the line.
//
// Thread-safety: immutable after creation.
//
//   ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::FromVocabulary(vocab));
//   ASSIGN_OR_RETURN(std::string prompt, chat.Apply(messages, /*add_generation_prompt=*/true));
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/jinja/template.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

// A plain text message (role and content); ChatInputs carries the rest.
struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
};

// Everything a template renders from, as JSON shaped like an OpenAI request.
struct ChatInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: none (the template sees None)
  bool add_generation_prompt = true;
  // Extra template variables (vLLM's chat_template_kwargs).
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  // What strftime_now formats; 0: now.
  std::time_t now = 0;
};

// `messages` as ChatInputs messages ({"role": ..., "content": ...}).
nlohmann::ordered_json ChatMessagesToJson(std::span<const ChatMessage> messages);

// One piece of a rendered chat: a special-token text the template itself
// writes (a marker such as "<|im_start|>", or the BOS text), or plain text.
struct ChatPiece {
  std::string text;
  bool is_marker = false;
};

struct ChatTemplateOptions {
  // The texts the template's bos_token / eos_token variables stand for.
  std::string bos_token;
  std::string eos_token;
  // The vocabulary's special-token texts: where the template writes one, it
  // is a marker.
  std::vector<std::string> marker_texts;
  // Named in errors.
  std::string name = "chat_template";
};

class ChatTemplate {
 public:
  // INVALID_ARGUMENT for an empty template or one jinja2 would not compile.
  static absl::StatusOr<ChatTemplate> FromTemplateSource(std::string_view jinja_source,
                                                         ChatTemplateOptions options = {});
  // The vocabulary's chat_template, with its BOS/EOS and special-token texts.
  static absl::StatusOr<ChatTemplate> FromVocabulary(const Vocabulary& vocab);

  // INVALID_ARGUMENT for no messages, text that is not valid UTF-8, and
  // whatever the template raises. Concatenating the pieces gives the text
  // jinja2 renders.
  absl::StatusOr<std::vector<ChatPiece>> Render(const ChatInputs& inputs) const;
  absl::StatusOr<std::vector<ChatPiece>> Render(std::span<const ChatMessage> messages,
                                                bool add_generation_prompt) const;
  // The rendered text (it holds special-token texts: encode it with
  // parse_special, or use EncodeChat, which keeps content's plain).
  absl::StatusOr<std::string> Apply(const ChatInputs& inputs) const;
  absl::StatusOr<std::string> Apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  const std::string& bos_token() const { return options_.bos_token; }

 private:
  ChatTemplate(jinja::Template t, ChatTemplateOptions options)
      : template_(std::move(t)), options_(std::move(options)) {}
  std::vector<ChatPiece> SplitMarkers(const jinja::Text& text) const;

  jinja::Template template_;
  ChatTemplateOptions options_;
  // marker texts by first byte, longest first (leftmost-longest matching).
  std::vector<std::string> markers_by_first_byte_[256];
};

// The text of a chat template file given by a flag (--chat-template, as
// vLLM's), which replaces a model's own; NOT_FOUND or INVALID_ARGUMENT
// naming the flag and the file when it cannot be read or is empty.
absl::StatusOr<std::string> ReadChatTemplateFile(const std::string& path);

}  // namespace kvfleet::model
