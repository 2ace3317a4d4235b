#include "model/jinja/text.h"

#include <algorithm>

namespace kvfleet::jinja {

Text::Text(std::string s, bool from_input) : bytes_(std::move(s)) {
  if (from_input && !bytes_.empty()) input_.assign(bytes_.size(), 1);
}

bool Text::HasInput() const { return std::find(input_.begin(), input_.end(), 1) != input_.end(); }

void Text::Append(const Text& other) {
  const bool had_mask = !input_.empty();
  const bool other_mask = !other.input_.empty();
  if (had_mask || other_mask) {
    if (!had_mask) input_.assign(bytes_.size(), 0);
    if (other_mask) {
      input_ += other.input_;
    } else {
      input_.append(other.bytes_.size(), 0);
    }
  }
  bytes_ += other.bytes_;
}

void Text::AppendLiteral(std::string_view s) {
  bytes_.append(s);
  if (!input_.empty()) input_.append(s.size(), 0);
}

Text Text::Substr(size_t pos, size_t n) const {
  Text out;
  out.bytes_ = bytes_.substr(pos, n);
  if (!input_.empty()) out.input_ = input_.substr(pos, n);
  return out;
}

}  // namespace kvfleet::jinja
