// Strong integer types for ids, so a TokenId cannot be passed where a
// BlockId is expected.
//
//   using BlockId = StrongId<struct BlockIdTag, int32_t>;
//   BlockId b(3); int32_t raw = b.value();
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>

namespace kvfleet {

template <typename Tag, typename T>
class StrongId {
 public:
  using ValueType = T;
  constexpr StrongId() = default;
  constexpr explicit StrongId(T value) : value_(value) {}
  constexpr T value() const { return value_; }
  constexpr auto operator<=>(const StrongId&) const = default;

  template <typename H>
  friend H AbslHashValue(H h, const StrongId& id) {
    return H::combine(std::move(h), id.value_);
  }
  friend std::ostream& operator<<(std::ostream& os, const StrongId& id) { return os << id.value_; }

 private:
  T value_{};
};

}  // namespace kvfleet

template <typename Tag, typename T>
struct std::hash<kvfleet::StrongId<Tag, T>> {
  size_t operator()(const kvfleet::StrongId<Tag, T>& id) const { return std::hash<T>()(id.value()); }
};
