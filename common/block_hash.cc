#include "common/block_hash.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <array>
#include <memory>
#include <string>

#include "common/check.h"

// The exact bytes hashed. Router, worker and cachemanager must agree on them
// bit for bit, so they are pinned here and by a known-answer test
// (tests/unit/common/block_hash_test.cc). All integers are little-endian;
// `u64(x)` is 8 bytes, `i32(x)` is 4 bytes (two's complement).
//
//   root  = SHA-256( "kvfleet-root" 0x00
//                    ‖ u64(len(model_id))    ‖ model_id bytes
//                    ‖ u64(len(fingerprint)) ‖ fingerprint bytes
//                    ‖ u64(len(cache_salt))  ‖ cache_salt bytes
//                    [‖ u64(len(adapter))    ‖ adapter bytes, only under a LoRA adapter] )
//   chain = SHA-256( u64(parent.hi) ‖ u64(parent.lo)
//                    ‖ u64(number of tokens) ‖ i32(token) for each token
//                    ‖ u64(len(extra)) ‖ extra bytes )
//
// Every variable-length field is length-prefixed, so no two different inputs
// encode to the same bytes ("ab"+"c" vs "a"+"bc"). The root's tag keeps a root
// input from ever looking like a chain input. Of the 32-byte digest the first
// 16 bytes are kept: bytes 0..7 read big-endian are `hi`, bytes 8..15 are
// `lo`, so ToHex() equals the first 32 hex digits of the SHA-256 hex digest.

namespace kvfleet {
namespace {

void AppendU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void AppendBytes(std::string& out, std::string_view bytes) {
  AppendU64(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

// SHA256() would look the algorithm up (under a global lock, in OpenSSL 3)
// on every call; the router, the workers and the simulator hash every block
// of every prompt, so the algorithm is fetched once and each thread keeps
// its own context.
const EVP_MD* Sha256() {
  static const EVP_MD* md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    CHECK(fetched != nullptr) << "OpenSSL has no SHA-256";
    return fetched;
  }();
  return md;
}

BlockHash Digest(const std::string& input) {
  struct ContextDeleter {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  thread_local std::unique_ptr<EVP_MD_CTX, ContextDeleter> ctx(EVP_MD_CTX_new());
  std::array<unsigned char, SHA256_DIGEST_LENGTH> md{};
  unsigned int size = 0;
  CHECK(ctx != nullptr && EVP_DigestInit_ex2(ctx.get(), Sha256(), nullptr) == 1 &&
        EVP_DigestUpdate(ctx.get(), input.data(), input.size()) == 1 &&
        EVP_DigestFinal_ex(ctx.get(), md.data(), &size) == 1 && size == md.size())
      << "SHA-256 failed";
  BlockHash h;
  for (int i = 0; i < 8; ++i) {
    h.hi = (h.hi << 8) | md[i];
    h.lo = (h.lo << 8) | md[8 + i];
  }
  return h;
}

}  // namespace

std::string BlockHash::ToHex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = kDigits[(hi >> (4 * i)) & 0xf];
    out[31 - i] = kDigits[(lo >> (4 * i)) & 0xf];
  }
  return out;
}

std::string BlockHash::ToBytes() const {
  std::string out(16, '\0');
  for (int i = 0; i < 8; ++i) {
    out[7 - i] = static_cast<char>((hi >> (8 * i)) & 0xff);
    out[15 - i] = static_cast<char>((lo >> (8 * i)) & 0xff);
  }
  return out;
}

std::optional<BlockHash> BlockHash::FromBytes(std::string_view bytes) {
  if (bytes.size() != 16) return std::nullopt;
  BlockHash h;
  for (int i = 0; i < 8; ++i) {
    h.hi = (h.hi << 8) | static_cast<uint8_t>(bytes[i]);
    h.lo = (h.lo << 8) | static_cast<uint8_t>(bytes[8 + i]);
  }
  return h;
}

BlockHash RootBlockHash(std::string_view model_id, std::string_view model_fingerprint, std::string_view cache_salt,
                        std::string_view adapter) {
  static constexpr std::string_view kTag("kvfleet-root\0", 13);
  std::string input;
  input.reserve(kTag.size() + 24 + model_id.size() + model_fingerprint.size() + cache_salt.size());
  input.append(kTag.data(), kTag.size());
  AppendBytes(input, model_id);
  AppendBytes(input, model_fingerprint);
  AppendBytes(input, cache_salt);
  // Every field is length-prefixed, so one more after the salt cannot make
  // an input another's: a base model's roots stay what they were.
  if (!adapter.empty()) AppendBytes(input, adapter);
  return Digest(input);
}

BlockHash ChainBlockHash(const BlockHash& parent, std::span<const int32_t> tokens, std::string_view extra) {
  std::string input;
  input.reserve(32 + 4 * tokens.size() + extra.size());
  AppendU64(input, parent.hi);
  AppendU64(input, parent.lo);
  AppendU64(input, tokens.size());
  const size_t at = input.size();
  input.resize(at + 4 * tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto u = static_cast<uint32_t>(tokens[i]);
    for (int b = 0; b < 4; ++b) input[at + 4 * i + b] = static_cast<char>((u >> (8 * b)) & 0xff);
  }
  AppendBytes(input, extra);
  return Digest(input);
}

std::vector<BlockHash> HashFullBlocks(const BlockHash& root, std::span<const int32_t> tokens, int64_t block_size) {
  CHECK_GT(block_size, 0) << "block_size " << block_size;
  const auto n = static_cast<int64_t>(tokens.size()) / block_size;
  std::vector<BlockHash> hashes;
  hashes.reserve(static_cast<size_t>(n));
  BlockHash parent = root;
  for (int64_t i = 0; i < n; ++i) {
    parent =
        ChainBlockHash(parent, tokens.subspan(static_cast<size_t>(i * block_size), static_cast<size_t>(block_size)));
    hashes.push_back(parent);
  }
  return hashes;
}

}  // namespace kvfleet
