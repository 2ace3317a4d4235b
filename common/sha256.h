// SHA-256, incrementally, as lowercase hex: model fingerprints and the
// identity of an evaluation text.
//
//   Sha256 h;  h.Update(bytes.data(), bytes.size());  std::string hex = h.HexDigest();
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace kvfleet {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  // Ends the digest: call once.
  std::string HexDigest();

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
};

inline std::string Sha256Hex(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes.data(), bytes.size());
  return h.HexDigest();
}

}  // namespace kvfleet
