#include "engine/spec/suffix_store.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kvfleet::engine::spec {

namespace {

// A flat_hash_map slot is the key and value plus one control byte. A node
// is an edge's child (a slot in `edges_`) or a tenant's root (a larger
// slot in `roots_`). There are no more roots than stored sequences, and
// each sequence is charged kSequenceOverheadTokens nodes' worth of the
// bound, far more than its root's slot: BytesPerNode is an edge child's.
constexpr int64_t kEdgeSlot = static_cast<int64_t>(sizeof(std::pair<uint64_t, int32_t>)) + 1;
constexpr int64_t kRootSlot = static_cast<int64_t>(sizeof(std::pair<BlockHash, int32_t>)) + 1;

}  // namespace

SuffixStore::SuffixStore(Options options) : options_(options) {
  CHECK(options_.max_depth >= 1 && options_.max_nodes >= options_.max_depth + 1)
      << "suffix store: need max_depth >= 1 and max_nodes > max_depth";
}

int64_t SuffixStore::BytesPerNode() {
  // The tables double when 7/8 full, so they are at least 7/16 full. The
  // node vector doubles too (half of it may be spare). Stored tokens are
  // bounded by max_nodes as well, so each node also carries one token.
  // A root's slot, at the tables' lowest load, within its sequence's overhead.
  static_assert(kRootSlot * 16 / 7 < kSequenceOverheadTokens * kEdgeSlot);
  const int64_t slot = kEdgeSlot;
  // The free list may hold every node once, in a doubling vector too.
  return 2 * static_cast<int64_t>(sizeof(Node)) + 2 * static_cast<int64_t>(sizeof(int32_t)) + (slot * 16 + 6) / 7 +
         static_cast<int64_t>(sizeof(model::TokenId));
}

int64_t SuffixStore::AllocatedBytes() const {
  return static_cast<int64_t>(nodes_.capacity() * sizeof(Node)) +
         static_cast<int64_t>(free_.capacity() * sizeof(int32_t)) +
         static_cast<int64_t>(edges_.capacity()) * kEdgeSlot + static_cast<int64_t>(roots_.capacity()) * kRootSlot +
         sequence_bytes_;
}

int32_t SuffixStore::AllocateNode() {
  ++live_nodes_;
  if (!free_.empty()) {
    const int32_t id = free_.back();
    free_.pop_back();
    return id;
  }
  nodes_.emplace_back();
  return static_cast<int32_t>(nodes_.size() - 1);
}

int32_t SuffixStore::AcquireRoot(const BlockHash& tenant) {
  auto [it, inserted] = roots_.try_emplace(tenant, -1);
  if (inserted) {
    it->second = AllocateNode();
    nodes_[it->second] = Node{};
  }
  ++nodes_[it->second].count;
  return it->second;
}

void SuffixStore::ReleaseRoot(const BlockHash& tenant, int32_t root) {
  if (--nodes_[root].count > 0) return;
  DCHECK(nodes_[root].first_child < 0) << "freeing a tenant's root with children";
  roots_.erase(tenant);
  nodes_[root] = Node{};
  free_.push_back(root);
  --live_nodes_;
}

int32_t SuffixStore::NewNode(int32_t parent, model::TokenId token) {
  const int32_t id = AllocateNode();
  Node& n = nodes_[id];
  n = Node{.token = token, .depth = nodes_[parent].depth + 1, .count = 0, .parent = parent};
  n.next_sibling = nodes_[parent].first_child;
  if (n.next_sibling >= 0) nodes_[n.next_sibling].prev_sibling = id;
  nodes_[parent].first_child = id;
  edges_.emplace(EdgeKey(parent, token), id);
  return id;
}

void SuffixStore::FreeNode(int32_t id) {
  Node& n = nodes_[id];
  DCHECK(n.first_child < 0) << "freeing a node with children";
  if (n.prev_sibling >= 0) {
    nodes_[n.prev_sibling].next_sibling = n.next_sibling;
  } else {
    nodes_[n.parent].first_child = n.next_sibling;
  }
  if (n.next_sibling >= 0) nodes_[n.next_sibling].prev_sibling = n.prev_sibling;
  edges_.erase(EdgeKey(n.parent, n.token));
  n = Node{};
  free_.push_back(id);
  --live_nodes_;
}

int32_t SuffixStore::Child(int32_t node, model::TokenId token) const {
  const auto it = edges_.find(EdgeKey(node, token));
  return it == edges_.end() ? -1 : it->second;
}

void SuffixStore::ForEachChild(int32_t node, const std::function<void(model::TokenId, int64_t)>& visit) const {
  for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling)
    visit(nodes_[c].token, nodes_[c].count);
}

int32_t SuffixStore::Find(int32_t root, std::span<const model::TokenId> tokens) const {
  int32_t node = root;
  for (model::TokenId t : tokens) {
    node = Child(node, t);
    if (node < 0) return -1;
  }
  return node;
}

void SuffixStore::Add(const BlockHash& tenant, std::span<const model::TokenId> sequence) {
  if (sequence.empty()) return;
  const int64_t room = options_.max_nodes - kSequenceOverheadTokens;
  if (room <= 0) return;
  sequence = sequence.first(std::min<size_t>(sequence.size(), static_cast<size_t>(room)));
  const auto n = static_cast<int64_t>(sequence.size());
  while (!sequences_.empty() && stored_tokens_ + n + kSequenceOverheadTokens > options_.max_nodes) ForgetOldest();
  // A new tenant's root needs a node of its own beside the first walk.
  while (!sequences_.empty() && !roots_.contains(tenant) && live_nodes_ + 1 + options_.max_depth > options_.max_nodes) {
    ForgetOldest();
  }
  // Held through the evictions below, which may forget this tenant's other sequences.
  const int32_t root = AcquireRoot(tenant);
  int64_t starts = n;
  for (int64_t start = 0; start < n; ++start) {
    // Room for this start's walk (at most max_depth new nodes): the oldest
    // sequences go first. Evicting cannot free a node this sequence has
    // counted, and a sequence too long for the bound alone keeps the starts
    // that fit.
    while (!sequences_.empty() && live_nodes_ + options_.max_depth > options_.max_nodes) ForgetOldest();
    if (live_nodes_ + options_.max_depth > options_.max_nodes) {
      starts = start;
      break;
    }
    int32_t node = root;
    const int64_t end = std::min<int64_t>(n, start + options_.max_depth);
    for (int64_t i = start; i < end; ++i) {
      int32_t next = Child(node, sequence[i]);
      if (next < 0) next = NewNode(node, sequence[i]);
      ++nodes_[next].count;
      node = next;
    }
  }
  if (starts == 0) {
    ReleaseRoot(tenant, root);
    return;
  }
  // Only the tokens the inserted substrings reach are kept. The root's
  // reference passes to the stored sequence.
  const int64_t kept = std::min<int64_t>(n, starts - 1 + options_.max_depth);
  sequences_.push_back({.tokens = std::vector<model::TokenId>(sequence.begin(), sequence.begin() + kept),
                        .starts = starts,
                        .tenant = tenant,
                        .root = root});
  stored_tokens_ += kept + kSequenceOverheadTokens;
  sequence_bytes_ += SequenceBytes(sequences_.back());
}

void SuffixStore::ForgetOldest() {
  Remove(sequences_.front());
  ReleaseRoot(sequences_.front().tenant, sequences_.front().root);
  stored_tokens_ -= static_cast<int64_t>(sequences_.front().tokens.size()) + kSequenceOverheadTokens;
  sequence_bytes_ -= SequenceBytes(sequences_.front());
  sequences_.pop_front();
}

void SuffixStore::Remove(const Stored& stored) {
  const std::vector<model::TokenId>& sequence = stored.tokens;
  const auto n = static_cast<int64_t>(sequence.size());
  std::vector<int32_t> path;
  for (int64_t start = 0; start < stored.starts; ++start) {
    path.clear();
    int32_t node = stored.root;
    const int64_t end = std::min<int64_t>(n, start + options_.max_depth);
    for (int64_t i = start; i < end; ++i) {
      node = Child(node, sequence[i]);
      CHECK(node >= 0) << "suffix store: a stored substring is missing";
      --nodes_[node].count;
      path.push_back(node);
    }
    // Counts fall along the path, so the zeros are its deepest part.
    for (auto it = path.rbegin(); it != path.rend() && nodes_[*it].count == 0; ++it) FreeNode(*it);
  }
}

SuffixStore::Match SuffixStore::LongestSuffix(const BlockHash& tenant, std::span<const model::TokenId> context,
                                              int32_t max_length) const {
  const auto found = roots_.find(tenant);
  if (found == roots_.end()) return {};
  const int32_t root = found->second;
  const auto len = static_cast<int32_t>(std::min<size_t>(context.size(), static_cast<size_t>(INT32_MAX)));
  int32_t hi = std::min({max_length, options_.max_depth - 1, len});
  if (hi <= 0) return {};
  // Occurrence is monotone in the length: a substring's suffixes are
  // substrings too (each was added from its own start). Bisect the longest.
  int32_t lo = 0;  // the empty suffix (the root) always occurs
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (Find(root, context.subspan(len - mid)) >= 0) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  // The longest may end its text (a leaf); a shorter one may go on.
  for (int32_t m = lo; m >= 1; --m) {
    // A sequence cut short by the bound lacks some suffixes of its last
    // substrings, so a shorter one may be missing.
    const int32_t node = Find(root, context.subspan(len - m));
    if (node >= 0 && nodes_[node].first_child >= 0) return {.node = node, .length = m};
  }
  return {};
}

absl::Status SuffixStore::Audit() const {
  // Every substring of every stored sequence, by tenant; the empty one
  // counts the tenant's sequences (its root's count).
  using Substring = std::pair<BlockHash, std::vector<model::TokenId>>;
  std::map<Substring, int64_t> want;
  for (const Stored& stored : sequences_) {
    const std::vector<model::TokenId>& s = stored.tokens;
    ++want[{stored.tenant, {}}];
    for (size_t start = 0; start < static_cast<size_t>(stored.starts); ++start) {
      Substring sub{stored.tenant, {}};
      for (size_t i = start; i < std::min(s.size(), start + static_cast<size_t>(options_.max_depth)); ++i) {
        sub.second.push_back(s[i]);
        ++want[sub];
      }
    }
  }
  std::map<Substring, int64_t> children;
  for (const auto& [sub, count] : want) {
    if (!sub.second.empty()) ++children[{sub.first, {sub.second.begin(), sub.second.end() - 1}}];
  }
  const auto edges = static_cast<int64_t>(edges_.size());
  const auto roots = static_cast<int64_t>(roots_.size());
  if (static_cast<int64_t>(want.size()) != live_nodes_ || edges + roots != live_nodes_) {
    return absl::InternalError(absl::StrCat("suffix store: ", live_nodes_, " nodes, ", edges, " edges and ", roots,
                                            " tenants, but the stored text has ", want.size(),
                                            " substrings and roots"));
  }
  for (const auto& [sub, count] : want) {
    const auto root = roots_.find(sub.first);
    const int32_t node = root == roots_.end() ? -1 : Find(root->second, sub.second);
    if (node < 0 || nodes_[node].count != count || nodes_[node].depth != static_cast<int32_t>(sub.second.size())) {
      return absl::InternalError(absl::StrCat("suffix store: a substring of ", sub.second.size(), " tokens counts ",
                                              node < 0 ? -1 : nodes_[node].count, ", want ", count));
    }
    int64_t listed = 0;
    for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling) ++listed;
    if (listed != children[sub]) return absl::InternalError("suffix store: a child list disagrees with the text");
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::engine::spec
