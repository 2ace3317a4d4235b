// Content hashes of KV blocks, shared by the router, the workers and the
// cachemanager (docs/design.md, "KV cache and block hashing"): all three
// must compute the same value for the same tokens, or prefix-aware routing
// silently gets 0% hits.
//
//   hash_{-1} = H("kvfleet-root" ‖ model id ‖ model fingerprint ‖ cache salt)
//   hash_i    = H(hash_{i-1} ‖ tokens of block i ‖ extra)
//
// H is SHA-256 (OpenSSL) truncated to 128 bits: a non-cryptographic hash let
// one tenant forge collisions with another's cached prefix in another engine
// (CVE-2025-25183), and the salt keeps tenants from probing each other's
// prefixes. The fingerprint (SHA-256 of the weights, model/model_fingerprint.h)
// keeps two models served under one id, or a model whose weights changed
// under its id, from sharing KV; a worker always knows it, and a router
// learns it from its workers. Only full blocks are hashed.
//
// Thread-safety: pure functions.
//
//   BlockHash root = RootBlockHash("SmolLM2-135M-Instruct", /*cache_salt=*/"");
//   std::vector<BlockHash> hashes = HashFullBlocks(root, tokens, /*block_size=*/16);
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvfleet {

struct BlockHash {
  uint64_t hi = 0;
  uint64_t lo = 0;

  auto operator<=>(const BlockHash&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const BlockHash& b) {
    return H::combine(std::move(h), b.hi, b.lo);
  }
  // 32 lowercase hex digits, hi first.
  std::string ToHex() const;
  // The wire form every kvfleet API uses: 16 bytes, hi then lo, big-endian.
  std::string ToBytes() const;
  // nullopt unless `bytes` is exactly 16 bytes long.
  static std::optional<BlockHash> FromBytes(std::string_view bytes);
};

// `adapter` is the identity of the LoRA adapter a request runs under
// (LoraAdapter::identity(): its name and a digest of its weights), empty
// for the base model, whose roots it leaves as they were: KV computed under
// an adapter is shared only with requests under the same adapter, the same
// weights included.
BlockHash RootBlockHash(std::string_view model_id, std::string_view model_fingerprint, std::string_view cache_salt,
                        std::string_view adapter = {});
// No fingerprint known (tools, tests, benchmarks): the same with an empty one.
inline BlockHash RootBlockHash(std::string_view model_id, std::string_view cache_salt) {
  return RootBlockHash(model_id, std::string_view(), cache_salt);
}

// tokens are the block's token ids; extra covers anything else that changes
// the block's KV (adapters, multimodal inputs), empty when nothing does.
BlockHash ChainBlockHash(const BlockHash& parent, std::span<const int32_t> tokens, std::string_view extra = {});

// The hashes of every full block of `tokens`, in order.
std::vector<BlockHash> HashFullBlocks(const BlockHash& root, std::span<const int32_t> tokens, int64_t block_size);

}  // namespace kvfleet
