#include "model/tokenizer/bpe_merges.h"

#include <queue>

namespace kvfleet::model {
namespace {

struct Symbol {
  TokenId id;
  int32_t prev;  // -1 at the start
  int32_t next;  // -1 at the end
};

struct Candidate {
  int32_t rank;
  int32_t left;  // index of the left symbol; symbols keep their original order
  TokenId left_id;
  TokenId right_id;
  TokenId merged;
  // std::priority_queue is a max-heap: "greater" here means "merged later".
  bool operator<(const Candidate& other) const {
    if (rank != other.rank) return rank > other.rank;
    return left > other.left;
  }
};

}  // namespace

void BpeMerges::Add(TokenId left, TokenId right, TokenId merged) {
  table_.try_emplace(Key(left, right), Merge{static_cast<int32_t>(table_.size()), merged});
}

const BpeMerges::Merge* BpeMerges::Find(TokenId left, TokenId right) const {
  if (left < 0 || right < 0) return nullptr;
  auto it = table_.find(Key(left, right));
  return it == table_.end() ? nullptr : &it->second;
}

void BpeMerges::Apply(std::span<const TokenId> initial, std::vector<TokenId>* out) const {
  const auto n = static_cast<int32_t>(initial.size());
  if (n <= 1) {
    out->insert(out->end(), initial.begin(), initial.end());
    return;
  }
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) symbols[i] = {initial[i], i - 1, i + 1 < n ? i + 1 : -1};

  std::priority_queue<Candidate> heap;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    if (const Merge* m = Find(symbols[left].id, symbols[right].id)) {
      heap.push({m->rank, left, symbols[left].id, symbols[right].id, m->merged});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    // Stale when the left symbol was merged into its neighbour (id -1 marks
    // a removed symbol), or either side changed since the entry was pushed.
    if (left.id != c.left_id || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != c.right_id) continue;
    left.id = c.merged;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out->push_back(symbols[i].id);
}

}  // namespace kvfleet::model
