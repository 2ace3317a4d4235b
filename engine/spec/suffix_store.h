// The suffix proposer's memory of earlier outputs: a trie of every
// substring of up to max_depth tokens of the sequences added, each node
// counting how often its substring occurs. A context's longest suffix that
// occurs in the store names a node; the node's children, by count, say what
// followed that suffix and how often, so count(child) / count(node) is the
// estimated probability of the next token (SuffixDecoding's global tree,
// with the depth bounded instead of a full suffix tree).
//
// Tenants never share a trie: every sequence is added under a tenant key
// (the request's cache root, RootBlockHash of the model and its cache
// salt, the same key that separates tenants' KV blocks), each key has its
// own root, and a query walks only its own tenant's trie. Otherwise one
// tenant's text would be drafted for another, and the other's acceptance
// rate, and with it its latency, would tell it what the first wrote. The
// bound below is shared (one tenant's volume can push out another's older
// outputs, which changes how much is kept, never whose text is proposed);
// a root counts as a node, and goes with its tenant's last sequence.
//
// Memory is bounded: the store never holds more than max_nodes nodes nor
// max_nodes tokens of sequence (each sequence counting 16 more for its
// bookkeeping). Adding a sequence past the bound first
// forgets the oldest sequences (every one of their substrings is
// decremented, and nodes reaching zero are freed), so the store keeps the
// most recent text. BytesPerNode() is the worst case of one node with its
// share of the hash table and the stored tokens, so a byte budget divided
// by it bounds the footprint (tests compare it with the containers' real
// capacity).
//
// Invariant: a child's count never exceeds its parent's, because every
// occurrence increments the whole path from the root; so when a removal
// brings a node to zero, every node below it on that path is at zero too.
//
// Cost: Add is O(length × max_depth) hash lookups; LongestSuffix is
// O(max_depth × log max_depth) (occurrence is monotone in the suffix
// length, so the length is bisected).
//
// Thread-safety: none; the engine thread owns it.
//
//   SuffixStore store({.max_depth = 24, .max_nodes = 1 << 20});
//   store.Add(tenant, output_tokens);
//   SuffixStore::Match m = store.LongestSuffix(tenant, context, 16);
//   store.ForEachChild(m.node, [](model::TokenId t, int64_t count) { ... });
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/block_hash.h"
#include "model/token_id.h"

namespace kvfleet::engine::spec {

class SuffixStore {
 public:
  struct Options {
    int32_t max_depth = 24;       // longest substring kept, in tokens
    int64_t max_nodes = 1 << 20;  // and at most this many tokens of sequence
  };

  // A node of the trie: the substring spelled by the path from the root.
  struct Match {
    int32_t node = -1;   // -1: nothing matched
    int32_t length = 0;  // tokens of the context's suffix matched (the node's depth)
  };

  // CHECK-fails unless max_depth >= 1 and max_nodes > max_depth (a root
  // and one substring).
  explicit SuffixStore(Options options);

  // Remembers `sequence` (its first max_nodes tokens) for `tenant`,
  // forgetting the oldest sequences (of any tenant) as needed to stay
  // within the bounds.
  void Add(const BlockHash& tenant, std::span<const model::TokenId> sequence);

  // The longest suffix of `context`, at most max_length tokens, that occurs
  // in `tenant`'s sequences and has something after it (a child). {-1, 0}
  // when none.
  Match LongestSuffix(const BlockHash& tenant, std::span<const model::TokenId> context, int32_t max_length) const;

  // The children of `node`: each next token with its count.
  void ForEachChild(int32_t node, const std::function<void(model::TokenId, int64_t)>& visit) const;
  // The child of `node` spelled by `token`, or -1.
  int32_t Child(int32_t node, model::TokenId token) const;
  int64_t Count(int32_t node) const { return nodes_[node].count; }
  int32_t Depth(int32_t node) const { return nodes_[node].depth; }

  // Nodes held, the tenants' roots included.
  int64_t num_nodes() const { return live_nodes_; }
  int64_t num_tenants() const { return static_cast<int64_t>(roots_.size()); }
  // Tokens of sequence held, each sequence counting kSequenceOverheadTokens
  // more for its bookkeeping: at most max_nodes.
  int64_t num_tokens() const { return stored_tokens_; }
  int64_t num_sequences() const { return static_cast<int64_t>(sequences_.size()); }
  // The bytes the containers hold now (capacity, not size).
  int64_t AllocatedBytes() const;
  // The most bytes one node can cost: the node, its hash-table slot at the
  // lowest load the table reaches after growing, its share of the stored
  // tokens, and the spare capacity of a doubling vector.
  static int64_t BytesPerNode();

  // INTERNAL unless every count equals a recount of the stored
  // sequences and the child lists match the hash table (tests).
  absl::Status Audit() const;

 private:
  struct Node {
    model::TokenId token = -1;
    int32_t depth = 0;
    int64_t count = 0;
    int32_t parent = -1;
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t prev_sibling = -1;
  };

  // A sequence added: substrings were counted from its first `starts`
  // positions (all of them unless it alone outgrew the bound), under its
  // tenant's root.
  struct Stored {
    std::vector<model::TokenId> tokens;
    int64_t starts = 0;
    BlockHash tenant;
    int32_t root = -1;
  };

  static uint64_t EdgeKey(int32_t parent, model::TokenId token) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | static_cast<uint32_t>(token);
  }
  // A stored sequence's entry and allocation, in tokens' worth of bytes.
  static constexpr int64_t kSequenceOverheadTokens = 16;
  static int64_t SequenceBytes(const Stored& s) {
    return static_cast<int64_t>(sizeof(Stored) + s.tokens.capacity() * sizeof(model::TokenId));
  }

  int32_t AllocateNode();
  int32_t NewNode(int32_t parent, model::TokenId token);
  void FreeNode(int32_t node);
  // `tenant`'s root, made when it has none; its count holds one more
  // reference, which the caller gives back with ReleaseRoot.
  int32_t AcquireRoot(const BlockHash& tenant);
  void ReleaseRoot(const BlockHash& tenant, int32_t root);
  // The node spelled by `tokens` from `root`, or -1.
  int32_t Find(int32_t root, std::span<const model::TokenId> tokens) const;
  // Decrements every substring of `sequence`, freeing nodes at zero.
  void Remove(const Stored& stored);
  void ForgetOldest();

  Options options_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_;
  absl::flat_hash_map<uint64_t, int32_t> edges_;  // (parent, token) -> child
  // Each tenant's root: a node of depth 0 whose count is its stored
  // sequences (plus one while Add holds it).
  absl::flat_hash_map<BlockHash, int32_t> roots_;
  std::deque<Stored> sequences_;  // oldest first
  int64_t live_nodes_ = 0;        // roots included
  int64_t stored_tokens_ = 0;
  int64_t sequence_bytes_ = 0;  // SequenceBytes of every stored sequence
};

}  // namespace kvfleet::engine::spec
