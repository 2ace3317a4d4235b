// The merge table of a byte-level BPE vocabulary and the merge loop.
//
// Merges are keyed by the ids of their two parts, so the loop never builds
// strings. Within a word the pair of lowest rank is merged first; among
// pairs of equal rank the leftmost goes first (the order of GPT-2's
// reference code, Hugging Face tokenizers and llama.cpp). The loop keeps the
// word as a linked list of symbols and the candidate pairs in a min-heap, so
// a word of n symbols costs O(n log n); a stale heap entry (one of its
// symbols was merged away meanwhile) is recognised and dropped when popped.
//
// Thread-safety: immutable after construction.
//
//   BpeMerges merges;  merges.Add(id_of("Ġ"), id_of("t"), id_of("Ġt"));
//   merges.Apply({id_of("Ġ"), id_of("t")}, &out);  // {id_of("Ġt")}
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "model/token_id.h"

namespace kvfleet::model {

class BpeMerges {
 public:
  // Appends a merge with the next rank (the first added has the highest
  // priority). A later duplicate of a pair keeps the earlier rank.
  void Add(TokenId left, TokenId right, TokenId merged);
  int32_t size() const { return static_cast<int32_t>(table_.size()); }

  // Merges `symbols` (one id per initial symbol; a negative id never merges)
  // and appends the resulting ids to `out`.
  void Apply(std::span<const TokenId> symbols, std::vector<TokenId>* out) const;

 private:
  struct Merge {
    int32_t rank;
    TokenId merged;
  };
  static uint64_t Key(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  const Merge* Find(TokenId left, TokenId right) const;

  absl::flat_hash_map<uint64_t, Merge> table_;
};

}  // namespace kvfleet::model
