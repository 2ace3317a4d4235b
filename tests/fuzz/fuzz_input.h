// Reads a fuzzer's bytes as a sequence of choices: a byte, a bounded
// integer, a string of bounded length, the rest. Running out gives zeros and
// empty strings, so every input is a valid (if short) program.
//
//   FuzzInput in(data, size);
//   const bool bpe = in.Byte() & 1;
//   std::string text = in.String(512);
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kvfleet::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // In [0, bound): two bytes' worth, enough for the ranges used here.
  uint32_t Below(uint32_t bound) {
    const uint32_t v = (static_cast<uint32_t>(Byte()) << 8) | Byte();
    return bound == 0 ? 0 : v % bound;
  }
  // A length byte (at most `max_len`), then that many bytes.
  std::string String(size_t max_len) {
    const size_t n = std::min<size_t>({Byte(), max_len, size_ - std::min(pos_, size_)});
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  std::string Rest() {
    std::string s(reinterpret_cast<const char*>(data_ + std::min(pos_, size_)), size_ - std::min(pos_, size_));
    pos_ = size_;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Stops the fuzzer with a message when a property fails (libFuzzer records
// the input as a crash).
[[noreturn]] void Fail(const std::string& what);
inline void Check(bool ok, const std::string& what) {
  if (!ok) Fail(what);
}

}  // namespace kvfleet::fuzz
