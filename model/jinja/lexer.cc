#include "model/jinja/lexer.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/jinja/unicode.h"

namespace kvfleet::jinja {
namespace {

// "\r\n" and "\r" become "\n"; one final newline is dropped.
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      out.push_back('\n');
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      size_t open = FindTagOpen(pos_);
      std::string data = src_.substr(pos_, open - pos_);
      if (open == src_.size()) {
        Emit(Token::Type::kData, std::move(data));
        pos_ = open;
        break;
      }
      char kind = src_[open + 1];  // '{', '%' or '#'
      char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        data.resize(data.size() - TrailingSpaceBytes(data));
      } else if (sign != '+' && kind != '{') {
        LstripBlock(&data);
      }
      int data_line = line_;
      CountLines(pos_, open);
      if (!data.empty()) tokens_.push_back(Token{Token::Type::kData, std::move(data), 0, 0, data_line});
      pos_ = open + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#') {
        RETURN_IF_ERROR(SkipComment());
      } else if (kind == '%' && IsRawBlock()) {
        RETURN_IF_ERROR(ReadRaw());
      } else {
        RETURN_IF_ERROR(ReadTag(kind == '{'));
      }
    }
    tokens_.push_back(Token{Token::Type::kEnd, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("line ", line_, ": ", std::string(what)));
  }

  void Emit(Token::Type type, std::string value) {
    if (type == Token::Type::kData && value.empty()) return;
    tokens_.push_back(Token{type, std::move(value), 0, 0, line_});
  }

  void CountLines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < src_.size(); ++i) line_ += src_[i] == '\n';
  }

  size_t FindTagOpen(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  // lstrip_blocks: drop whitespace between the line's start and the tag.
  void LstripBlock(std::string* data) const {
    size_t line_start = data->rfind('\n');
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    if (line_start == 0 && !line_starting_) return;
    std::string_view tail = std::string_view(*data).substr(line_start);
    if (!tail.empty() && LeadingSpaceBytes(tail) == tail.size()) data->resize(line_start);
  }

  // After a tag's closing characters: "-" strips all whitespace, "+" keeps
  // everything, otherwise trim_blocks (blocks and comments) drops one newline.
  void AfterTagEnd(char sign, bool trim_newline) {
    if (sign == '-') {
      size_t skip = LeadingSpaceBytes(std::string_view(src_).substr(pos_));
      CountLines(pos_, pos_ + skip);
      line_starting_ = skip > 0 && src_[pos_ + skip - 1] == '\n';
      pos_ += skip;
      return;
    }
    line_starting_ = false;
    if (sign != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
      line_starting_ = true;
    }
  }

  absl::Status SkipComment() {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) return Error("missing end of comment tag");
    char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    CountLines(pos_, end + 2);
    pos_ = end + 2;
    AfterTagEnd(sign, true);
    return absl::OkStatus();
  }

  // At "{%" [sign] already consumed: whether the tag is "raw".
  bool IsRawBlock() const {
    size_t p = pos_;
    while (p < src_.size() && LeadingSpaceBytes(std::string_view(src_).substr(p, 1)) == 1) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    return p < src_.size() && !IsNameStart(src_[p]) && !IsDigit(src_[p]);
  }

  // Reads the end of a "{% raw %}" tag, the raw text and "{% endraw %}".
  absl::Status ReadRaw() {
    size_t close = src_.find("%}", pos_);
    if (close == std::string::npos) return Error("missing end of raw tag");
    char sign = src_[close - 1] == '-' || src_[close - 1] == '+' ? src_[close - 1] : '\0';
    CountLines(pos_, close + 2);
    pos_ = close + 2;
    AfterTagEnd(sign, false);
    for (size_t at = src_.find("{%", pos_); at != std::string::npos; at = src_.find("{%", at + 1)) {
      size_t p = at + 2;
      char begin_sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p++] : '\0';
      while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n')) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n')) ++p;
      char end_sign = '\0';
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) end_sign = src_[p++];
      if (src_.compare(p, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, at - pos_);
      if (begin_sign == '-') {
        text.resize(text.size() - TrailingSpaceBytes(text));
      } else if (begin_sign != '+') {
        LstripBlock(&text);
      }
      int text_line = line_;
      CountLines(pos_, p + 2);
      if (!text.empty()) tokens_.push_back(Token{Token::Type::kData, std::move(text), 0, 0, text_line});
      pos_ = p + 2;
      AfterTagEnd(end_sign, true);
      return absl::OkStatus();
    }
    return Error("missing endraw for a raw block");
  }

  absl::Status ReadTag(bool variable) {
    Emit(variable ? Token::Type::kVariableBegin : Token::Type::kBlockBegin, "");
    int depth = 0;  // open brackets: "}}" inside {{ {'a': {}} }} closes a dict first
    while (true) {
      if (pos_ >= src_.size()) return Error(variable ? "missing end of print tag '}}'" : "missing end of block tag '%}'");
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        line_ += c == '\n';
        ++pos_;
        continue;
      }
      if (depth == 0 && TryTagEnd(variable)) return absl::OkStatus();
      if (c == '"' || c == '\'') {
        RETURN_IF_ERROR(ReadString());
      } else if (IsDigit(c) || (c == '.' && pos_ + 1 < src_.size() && IsDigit(src_[pos_ + 1]) && !AfterDot())) {
        RETURN_IF_ERROR(ReadNumber());
      } else if (IsNameStart(c)) {
        size_t start = pos_;
        while (pos_ < src_.size() && (IsNameStart(src_[pos_]) || IsDigit(src_[pos_]))) ++pos_;
        Emit(Token::Type::kName, src_.substr(start, pos_ - start));
      } else {
        static constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/",
                                                          "%",  "~",  "<",  ">",  "=",  "(", ")", "[", "]", "{",
                                                          "}",  ",",  ".",  ":",  "|",  ";"};
        std::string_view rest = std::string_view(src_).substr(pos_);
        bool matched = false;
        for (std::string_view op : kOperators) {
          if (rest.substr(0, op.size()) == op) {
            if (op == "(" || op == "[" || op == "{") ++depth;
            if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
            Emit(Token::Type::kOperator, std::string(op));
            pos_ += op.size();
            matched = true;
            break;
          }
        }
        if (!matched) return Error(absl::StrCat("unexpected char '", std::string(1, c), "'"));
      }
    }
  }

  // A number right after "." is an attribute index (x.0), not a float.
  bool AfterDot() const { return !tokens_.empty() && tokens_.back().type == Token::Type::kOperator && tokens_.back().value == "."; }

  bool TryTagEnd(bool variable) {
    std::string_view rest = std::string_view(src_).substr(pos_);
    std::string_view close = variable ? "}}" : "%}";
    char sign = '\0';
    if (rest.substr(0, 2) == close) {
      pos_ += 2;
    } else if ((rest[0] == '-' || rest[0] == '+') && rest.substr(1, 2) == close) {
      sign = rest[0];
      pos_ += 3;
    } else {
      return false;
    }
    Emit(variable ? Token::Type::kVariableEnd : Token::Type::kBlockEnd, "");
    AfterTagEnd(sign, !variable);
    return true;
  }

  absl::Status ReadString() {
    char quote = src_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) return Error("unterminated string");
      char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= src_.size()) return Error("unterminated string");
      char e = src_[pos_++];
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\n': ++line_; break;  // a backslash-newline continues the line
        case 'x':
        case 'u':
        case 'U': {
          size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + digits > src_.size()) return Error("truncated \\x, \\u or \\U escape in a string");
          for (size_t i = 0; i < digits; ++i) {
            if (!IsHexDigit(src_[pos_ + i])) return Error("invalid \\x, \\u or \\U escape in a string");
          }
          char32_t cp = static_cast<char32_t>(std::strtoul(src_.substr(pos_, digits).c_str(), nullptr, 16));
          if (cp > 0x10FFFF) return Error("escape beyond U+10FFFF in a string");
          AppendCodePoint(cp, &out);
          pos_ += digits;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {  // octal, up to three digits
            int value = e - '0';
            for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++i) {
              value = value * 8 + (src_[pos_++] - '0');
            }
            AppendCodePoint(static_cast<char32_t>(value), &out);
          } else {  // unknown escapes stay as written, as Python's do
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    Emit(Token::Type::kString, std::move(out));
    return absl::OkStatus();
  }

  absl::Status ReadNumber() {
    size_t start = pos_;
    auto digits = [&](auto is_digit) {
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() &&
                                                              is_digit(src_[pos_ + 1])))) {
        ++pos_;
      }
    };
    auto clean = [&](size_t from) {
      std::string s;
      for (size_t i = from; i < pos_; ++i) {
        if (src_[i] != '_') s.push_back(src_[i]);
      }
      return s;
    };
    if (src_[pos_] == '0' && pos_ + 1 < src_.size() && std::string_view("xXoObB").find(src_[pos_ + 1]) != std::string_view::npos) {
      char base_char = src_[pos_ + 1] | 0x20;
      int base = base_char == 'x' ? 16 : base_char == 'o' ? 8 : 2;
      pos_ += 2;
      if (pos_ < src_.size() && src_[pos_] == '_') ++pos_;
      size_t from = pos_;
      digits([&](char c) { return base == 16 ? IsHexDigit(c) : base == 8 ? (c >= '0' && c <= '7') : (c == '0' || c == '1'); });
      if (pos_ == from) return Error("invalid integer literal");
      Token t{Token::Type::kInteger, src_.substr(start, pos_ - start), 0, 0, line_};
      t.integer = std::strtoll(clean(from).c_str(), nullptr, base);
      tokens_.push_back(std::move(t));
      return absl::OkStatus();
    }
    digits(IsDigit);
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      digits(IsDigit);
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && IsDigit(src_[p])) {
        is_float = true;
        pos_ = p;
        digits(IsDigit);
      }
    }
    std::string text = clean(start);
    Token t{is_float ? Token::Type::kFloat : Token::Type::kInteger, text, 0, 0, line_};
    if (is_float) {
      t.number = std::strtod(text.c_str(), nullptr);
    } else {
      t.integer = std::strtoll(text.c_str(), nullptr, 10);
    }
    tokens_.push_back(std::move(t));
    return absl::OkStatus();
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the start of the template counts as a line start
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) { return Lexer(NormalizeNewlines(source)).Run(); }

}  // namespace kvfleet::jinja
