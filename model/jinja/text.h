// A string value of the template engine, with where each byte came from.
//
// A chat template writes control-token texts ("<|im_start|>") and copies in
// message content. A user's content may contain the same texts; only the
// ones the template itself wrote may become control tokens. So every string
// carries, per byte, whether it came from the caller's input (messages,
// tools, kwargs) or from the template (its literals, bos_token, ...).
// Concatenation, slicing and stripping keep the per-byte origin exactly;
// any other transformation of a string that holds input bytes marks its
// whole result as input, which can only turn a would-be control token into
// plain text, never the reverse.
//
// Thread-safety: a value type.
//
//   Text t = Text::Literal("<|im_start|>");
//   t.Append(Text::Input(content));
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvfleet::jinja {

class Text {
 public:
  Text() = default;
  static Text Literal(std::string s) { return Text(std::move(s), false); }
  static Text Input(std::string s) { return Text(std::move(s), true); }
  // `s`, all input when `from_input`, else all literal.
  static Text Derived(std::string s, bool from_input) { return Text(std::move(s), from_input); }

  const std::string& str() const { return bytes_; }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  bool HasInput() const;
  bool IsInputByte(size_t i) const { return !input_.empty() && input_[i] != 0; }

  void Append(const Text& other);
  void AppendLiteral(std::string_view s);
  // Bytes [pos, pos + n), with their origins.
  Text Substr(size_t pos, size_t n = std::string::npos) const;

 private:
  Text(std::string s, bool from_input);

  std::string bytes_;
  // Empty when no byte came from input; otherwise one 0/1 per byte.
  std::string input_;
};

}  // namespace kvfleet::jinja
