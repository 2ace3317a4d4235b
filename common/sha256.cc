#include "common/sha256.h"

#include <openssl/evp.h>

#include <array>

#include "absl/strings/escaping.h"
#include "common/check.h"

namespace kvfleet {

struct Sha256::Context {
  struct Deleter {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Deleter> md{EVP_MD_CTX_new()};
};

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {
  CHECK(ctx_->md != nullptr && EVP_DigestInit_ex(ctx_->md.get(), EVP_sha256(), nullptr) == 1) << "SHA-256 failed";
}

Sha256::~Sha256() = default;

void Sha256::Update(const void* data, size_t size) {
  CHECK(EVP_DigestUpdate(ctx_->md.get(), data, size) == 1) << "SHA-256 failed";
}

std::string Sha256::HexDigest() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  CHECK(EVP_DigestFinal_ex(ctx_->md.get(), digest.data(), &size) == 1) << "SHA-256 failed";
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest.data()), size));
}

}  // namespace kvfleet
