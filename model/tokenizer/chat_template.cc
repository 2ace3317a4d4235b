#include "model/tokenizer/chat_template.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/json_value.h"
#include "model/tokenizer/special_tokens.h"
#include "model/tokenizer/utf8.h"

namespace kvfleet::model {

nlohmann::ordered_json ChatMessagesToJson(std::span<const ChatMessage> messages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTemplateSource(std::string_view jinja_source,
                                                              ChatTemplateOptions options) {
  if (jinja_source.empty()) {
    return absl::InvalidArgumentError("the model has no chat template (tokenizer.chat_template is empty)");
  }
  ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::Parse(jinja_source, options.name));
  ChatTemplate chat(std::move(t), std::move(options));
  for (const std::string& marker : chat.options_.marker_texts) {
    if (!marker.empty()) chat.markers_by_first_byte_[static_cast<unsigned char>(marker[0])].push_back(marker);
  }
  for (auto& bucket : chat.markers_by_first_byte_) {
    std::sort(bucket.begin(), bucket.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  }
  return chat;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromVocabulary(const Vocabulary& vocab) {
  ChatTemplateOptions options;
  if (vocab.bos.has_value()) options.bos_token = vocab.tokens[*vocab.bos];
  if (vocab.eos.has_value()) options.eos_token = vocab.tokens[*vocab.eos];
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (id < vocab.token_types.size() && IsSpecialTokenType(vocab.token_types[id])) {
      options.marker_texts.push_back(vocab.tokens[id]);
    }
  }
  return FromTemplateSource(vocab.chat_template, std::move(options));
}

std::vector<ChatPiece> ChatTemplate::SplitMarkers(const jinja::Text& text) const {
  const std::string& s = text.str();
  std::vector<ChatPiece> out;
  auto plain = [&](size_t from, size_t to) {
    if (from == to) return;
    if (out.empty() || out.back().is_marker) out.push_back({"", false});
    out.back().text.append(s, from, to - from);
  };
  size_t plain_from = 0;
  for (size_t i = 0; i < s.size();) {
    const std::string* hit = nullptr;
    for (const std::string& m : markers_by_first_byte_[static_cast<unsigned char>(s[i])]) {
      if (s.compare(i, m.size(), m) == 0) {
        hit = &m;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    bool from_template = true;
    for (size_t k = i; k < i + hit->size(); ++k) from_template &= !text.IsInputByte(k);
    if (from_template) {
      plain(plain_from, i);
      out.push_back({*hit, true});
      plain_from = i + hit->size();
    }
    i += hit->size();
  }
  plain(plain_from, s.size());
  return out;
}

absl::StatusOr<std::vector<ChatPiece>> ChatTemplate::Render(const ChatInputs& inputs) const {
  if (!inputs.messages.is_array() || inputs.messages.empty()) {
    return absl::InvalidArgumentError("chat template: the message list is empty");
  }
  // Hugging Face's variables: the special tokens, then the caller's
  // kwargs (which may override them), then the conversation itself.
  jinja::DictData vars;
  auto set = [&](std::string name, jinja::Value v) { vars.Set(jinja::Value::Literal(std::move(name)), std::move(v)); };
  set("bos_token", jinja::Value::Literal(options_.bos_token));
  set("eos_token", jinja::Value::Literal(options_.eos_token));
  if (inputs.kwargs.is_object()) {
    for (const auto& [k, v] : inputs.kwargs.items()) set(k, jinja::FromJson(v));
  }
  set("messages", jinja::FromJson(inputs.messages));
  set("tools", jinja::FromJson(inputs.tools));
  set("documents", jinja::Value::None());
  set("add_generation_prompt", jinja::Value::Bool(inputs.add_generation_prompt));
  ASSIGN_OR_RETURN(jinja::Text text, template_.Render(vars, {.now = inputs.now}));
  if (absl::Status s = ValidateUtf8(text.str()); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template: the conversation is not valid UTF-8: ", s.message()));
  }
  return SplitMarkers(text);
}

absl::StatusOr<std::vector<ChatPiece>> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                            bool add_generation_prompt) const {
  ChatInputs inputs;
  inputs.messages = ChatMessagesToJson(messages);
  inputs.add_generation_prompt = add_generation_prompt;
  return Render(inputs);
}

absl::StatusOr<std::string> ChatTemplate::Apply(const ChatInputs& inputs) const {
  ASSIGN_OR_RETURN(std::vector<ChatPiece> pieces, Render(inputs));
  std::string out;
  for (const ChatPiece& p : pieces) out.append(p.text);
  return out;
}

absl::StatusOr<std::string> ChatTemplate::Apply(std::span<const ChatMessage> messages,
                                                bool add_generation_prompt) const {
  ChatInputs inputs;
  inputs.messages = ChatMessagesToJson(messages);
  inputs.add_generation_prompt = add_generation_prompt;
  return Apply(inputs);
}

absl::StatusOr<std::string> ReadChatTemplateFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat("--chat-template ", path, " cannot be read"));
  if (text.str().empty()) return absl::InvalidArgumentError(absl::StrCat("--chat-template ", path, " is empty"));
  return text.str();
}

}  // namespace kvfleet::model
