#include "model/tokenizer/chat_template.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/tokenizer/utf8.h"

namespace kvfleet::model {
namespace {

constexpr std::string_view kSupported =
    "supported: ChatML (<|im_start|>role ... <|im_end|>, e.g. SmolLM2, Qwen2) and Llama 3 "
    "(<|start_header_id|>role<|end_header_id|> ... <|eot_id|>)";

// Features some templates of a supported family have and this renderer does
// not reproduce; finding one refuses the template rather than render it wrong.
struct Unsupported {
  std::string_view marker;
  std::string_view what;
};
constexpr Unsupported kUnsupported[] = {
    {"<think>", "reasoning blocks (<think>)"},
    {"Cutting Knowledge Date", "Llama 3.1's date preamble"},
    {"<|python_tag|>", "Llama 3.1 tool calls"},
    {"tool_calls", "assistant tool calls"},
};

// Decodes a Jinja string literal's body the way Jinja's lexer does for the
// escapes prompts use; nullopt for anything else, so an unusual literal is
// never half-understood.
std::optional<std::string> UnescapeJinja(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '\r') {  // Jinja normalises newlines in the source to "\n"
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      out.push_back('\n');
      continue;
    }
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++i == raw.size()) return std::nullopt;
    switch (raw[i]) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      default:
        return std::nullopt;
    }
  }
  return out;
}

// If `source` has, inside one string literal, `head` + newlines + text +
// `tail`, returns the text: the system prompt the template falls back to.
// `newlines` is how many line breaks the format puts after the header.
absl::StatusOr<std::optional<std::string>> FindDefaultSystemPrompt(std::string_view source, std::string_view head,
                                                                   int newlines, std::string_view tail) {
  for (size_t at = source.find(head); at != std::string_view::npos; at = source.find(head, at + 1)) {
    size_t pos = at + head.size();
    int seen = 0;
    while (seen < newlines) {
      if (source.substr(pos, 2) == "\\n") {
        pos += 2;
      } else if (source.substr(pos, 1) == "\n") {
        pos += 1;
      } else {
        break;
      }
      ++seen;
    }
    if (seen < newlines) continue;
    const size_t end = source.find(tail, pos);
    if (end == std::string_view::npos) continue;
    const std::string_view raw = source.substr(pos, end - pos);
    // A quote or a brace means the literal ended: the system text comes from
    // a variable (the user's own system message), not from the template.
    if (raw.empty() || raw.find_first_of("'\"{}") != std::string_view::npos) continue;
    std::optional<std::string> text = UnescapeJinja(raw);
    if (!text) {
      return absl::UnimplementedError(absl::StrCat("chat template: the default system prompt '", std::string(raw),
                                                   "' uses a string escape this renderer does not decode"));
    }
    return text;
  }
  return std::optional<std::string>();
}

// Python's str.strip() (Jinja's trim filter): Unicode White_Space plus the
// separators U+001C..U+001F that str.isspace() also counts.
bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string_view PythonStrip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    char32_t c = 0;
    const size_t len = DecodeUtf8(s, begin, &c);
    if (len == 0 || !IsPythonSpace(c)) break;
    begin += len;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    char32_t c = 0;
    if (DecodeUtf8(s, start, &c) != end - start || !IsPythonSpace(c)) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

bool IsKnownRole(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromTemplateSource(std::string_view source,
                                                              const ChatTemplateOptions& options) {
  if (source.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the model has no chat template; ", std::string(kSupported)));
  }
  ChatTemplate t;
  if (Contains(source, "<|im_start|>")) {
    t.family_ = Family::kChatMl;
  } else if (Contains(source, "<|start_header_id|>")) {
    t.family_ = Family::kLlama3;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template not recognised (it uses neither <|im_start|> "
                     "nor <|start_header_id|>); ",
                     std::string(kSupported)));
  }
  for (const Unsupported& u : kUnsupported) {
    if (Contains(source, u.marker)) {
      return absl::UnimplementedError(absl::StrCat(
          "chat template of the ", std::string(t.family_name()), " family uses ", std::string(u.what),
          ", which kvfleet does not render; ", std::string(kSupported), " without tool calls or reasoning blocks"));
    }
  }
  if (t.family_ == Family::kChatMl) {
    ASSIGN_OR_RETURN(t.default_system_prompt_, FindDefaultSystemPrompt(source, "<|im_start|>system", 1, "<|im_end|>"));
  } else {
    ASSIGN_OR_RETURN(t.default_system_prompt_,
                     FindDefaultSystemPrompt(source, "<|start_header_id|>system<|end_header_id|>", 2, "<|eot_id|>"));
  }
  t.bos_token_ = options.bos_token;
  t.renders_bos_ = Contains(source, "bos_token");
  t.trims_content_ = Contains(source, "| trim") || Contains(source, "|trim");
  t.has_tool_format_ = Contains(source, "tool_response") || Contains(source, "ipython");
  return t;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromVocabulary(const Vocabulary& vocab) {
  ChatTemplateOptions options;
  if (vocab.bos.has_value()) options.bos_token = vocab.tokens[*vocab.bos];
  if (vocab.eos.has_value()) options.eos_token = vocab.tokens[*vocab.eos];
  return FromTemplateSource(vocab.chat_template, options);
}

std::string_view ChatTemplate::family_name() const { return family_ == Family::kChatMl ? "ChatML" : "Llama 3"; }

namespace {

void Marker(std::string_view text, std::vector<ChatPiece>* out) { out->push_back({std::string(text), true}); }

void Plain(std::string_view text, std::vector<ChatPiece>* out) {
  if (!out->empty() && !out->back().is_marker) {
    out->back().text.append(text);
  } else {
    out->push_back({std::string(text), false});
  }
}

}  // namespace

void ChatTemplate::AppendMessage(std::string_view role, std::string_view content, std::vector<ChatPiece>* out) const {
  if (family_ == Family::kChatMl) {
    Marker("<|im_start|>", out);
    Plain(role, out);
    Plain("\n", out);
    Plain(content, out);
    Marker("<|im_end|>", out);
    Plain("\n", out);
  } else {
    Marker("<|start_header_id|>", out);
    Plain(role, out);
    Marker("<|end_header_id|>", out);
    Plain("\n\n", out);
    Plain(content, out);
    Marker("<|eot_id|>", out);
  }
}

absl::StatusOr<std::string> ChatTemplate::Apply(std::span<const ChatMessage> messages,
                                                bool add_generation_prompt) const {
  ASSIGN_OR_RETURN(std::vector<ChatPiece> pieces, Render(messages, add_generation_prompt));
  std::string out;
  for (const ChatPiece& p : pieces) out.append(p.text);
  return out;
}

absl::StatusOr<std::vector<ChatPiece>> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                            bool add_generation_prompt) const {
  if (messages.empty()) return absl::InvalidArgumentError("chat template: the message list is empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (!IsKnownRole(m.role)) {
      return absl::InvalidArgumentError(
          absl::StrCat("chat message ", i, " has role '", m.role, "'; roles are system, user, assistant and tool"));
    }
    if (m.role == "tool" && has_tool_format_) {
      return absl::UnimplementedError(absl::StrCat("chat message ", i, ": this ", std::string(family_name()),
                                                   " template formats tool results its own way, which kvfleet "
                                                   "does not render"));
    }
    if (absl::Status s = ValidateUtf8(m.content); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("chat message ", i, ": ", s.message()));
    }
  }
  std::vector<ChatPiece> out;
  if (renders_bos_) Marker(bos_token_, &out);
  if (default_system_prompt_.has_value() && messages[0].role != "system") {
    AppendMessage("system", *default_system_prompt_, &out);
  }
  // The template trims message content (a Jinja filter), not its own literals.
  for (const ChatMessage& m : messages) {
    AppendMessage(m.role, trims_content_ ? PythonStrip(m.content) : std::string_view(m.content), &out);
  }
  if (add_generation_prompt) {
    if (family_ == Family::kChatMl) {
      Marker("<|im_start|>", &out);
      Plain("assistant\n", &out);
    } else {
      Marker("<|start_header_id|>", &out);
      Plain("assistant", &out);
      Marker("<|end_header_id|>", &out);
      Plain("\n\n", &out);
    }
  }
  return out;
}

}  // namespace kvfleet::model
