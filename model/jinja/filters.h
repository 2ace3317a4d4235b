// jinja2's built-in filters, split by what they work on; builtins.h's
// CallFilter is the one entry point.
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/jinja/builtins.h"

namespace kvfleet::jinja {

using FilterFunction = absl::StatusOr<Value> (*)(Evaluator& ev, const Value& input, const ArgReader& args);

// Filters on strings and numbers (filters_text.cc).
FilterFunction FindTextFilter(std::string_view name);
// Filters on sequences and mappings (filters_sequence.cc).
FilterFunction FindSequenceFilter(std::string_view name);

// `item.a.b` / `item.0` as jinja2's attribute= arguments read it.
absl::StatusOr<Value> GetAttributePath(const Value& item, const Value& path);

}  // namespace kvfleet::jinja
