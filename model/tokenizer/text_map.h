// Hash maps keyed by text that can be searched with a std::string_view
// without copying the key. Debian's abseil builds absl::string_view as its
// own class, so absl's transparent string hash does not accept a
// std::string_view; these functors do.
//
//   TextMap<TokenId> by_text;  by_text["Ġthe"] = 262;
//   auto it = by_text.find(std::string_view("Ġthe"));
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"

namespace kvfleet::model {

struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

struct TextEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

template <typename Value>
using TextMap = absl::flat_hash_map<std::string, Value, TextHash, TextEq>;

template <typename Value>
using TextViewMap = absl::flat_hash_map<std::string_view, Value, TextHash, TextEq>;

}  // namespace kvfleet::model
