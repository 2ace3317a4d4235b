// Python's str, dict and list methods that templates call
// (message.content.strip(), tool.get('name'), s.split('\n')), bound to
// their object as function values, and the string operations the filters
// share with them.
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/jinja/value.h"

namespace kvfleet::jinja {

// The method `name` of `obj`, bound; nullopt when its type has none.
std::optional<Value> BindMethod(const Value& obj, std::string_view name);

// str.strip / lstrip / rstrip: Python whitespace, or any of `chars`.
Text StripText(const Text& s, const std::optional<std::string>& chars, bool left, bool right);
// str.replace(old, new[, count]); count < 0: all.
Text ReplaceText(const Text& s, std::string_view old, const Text& replacement, int64_t count);
// markupsafe's escape: & < > " ' become entities.
Text EscapeHtml(const Text& s);
// Python's str.upper / lower / title / capitalize (case mapping: unicode.h).
std::string PythonUpper(std::string_view s);
std::string PythonLower(std::string_view s);
std::string PythonTitle(std::string_view s);
std::string PythonCapitalize(std::string_view s);

}  // namespace kvfleet::jinja
