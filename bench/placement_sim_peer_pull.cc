// The simulator's peer KV pulls (placement_sim.h): a worker's pull from a
// peer, as the engine's StartPeerPull and FinishPeerPull do it, the network
// it crosses, and the prompt length where a pull starts to pay.
#include <algorithm>
#include <cmath>

#include "bench/placement_sim.h"
#include "bench/placement_sim_cluster.h"

namespace kvfleet::bench::placement_sim {

namespace {

// Gigabits per second as payload bytes per second (framing and protocol
// overhead left out: the link is as fast as its name).
double BytesPerSecond(double gbps) { return gbps * 1e9 / 8; }

}  // namespace

namespace detail {

// The engine's StartPeerPull, called by the worker's KvCacheManager at
// the request's first admission try (a split request's at its arrival, when
// a running slot is free: Deliver): the prompt's leading blocks its
// kv_peer names (never one that ends the prompt) that this worker holds in
// no tier, cut to the pool's free blocks (past them, committing the last
// would evict the first), of which the source sends the leading run it
// still holds (it may have evicted some since the index saw them). True:
// the request waits (kv_loading) while the worker steps for the others.
bool Simulation::StartPull(engine::Request& r, size_t worker) {
  const std::optional<engine::KvPeerSource>& peer = r.params.kv_peer;
  if (!peer.has_value()) return false;
  const SimWorker& w = *workers_[worker];
  const size_t source = transfer_index_.at(peer->endpoint);
  const int64_t reachable = std::max<int64_t>(r.num_tokens() - 1, 0) / o_.cluster.block_size;
  const int64_t asked =
      std::min<int64_t>({std::max(peer->blocks, 0), static_cast<int64_t>(r.prompt_block_hashes.size()), reachable});
  std::vector<size_t> wanted;
  for (int64_t k = 0; k < asked; ++k) {
    if (!Holds(w, r.prompt_block_hashes[static_cast<size_t>(k)])) wanted.push_back(static_cast<size_t>(k));
  }
  wanted.resize(std::min<size_t>(wanted.size(), static_cast<size_t>(std::max(w.pool.num_free(), 0))));
  size_t served = 0;
  while (served < wanted.size() && Holds(*workers_[source], r.prompt_block_hashes[wanted[served]])) ++served;
  wanted.resize(served);
  if (wanted.empty()) return false;
  r.kv_loading = true;
  r.kv_peer_tried = true;
  ++pulls_;
  const size_t i = r.id().value() - 1;
  LiveRequest& l = live_[i];
  for (size_t k : wanted) r.kv_pulling.push_back(r.prompt_block_hashes[k]);
  workers_[worker]->pending.Arriving(r.kv_pulling);
  l.pull_started = now_;
  l.pull_source = source;
  const double done = links_.Pull(source, worker, static_cast<int64_t>(wanted.size()) * block_bytes_, now_);
  l.pulling = std::move(wanted);
  Push(done, EventKind::kPullDone, i, worker);
  return true;
}

// The engine's FinishPeerPull: each block is committed as cached (its
// KV events tell the index) and held until all are in, so that allocating
// the next never evicts one just committed; then they are released last
// first (the head evicted last). The request may be admitted, and the
// pull's time per block feeds the worker's next load report. A pull that
// names a lease ends it: the source's blocks become ordinary cache.
void Simulation::FinishPull(size_t i, size_t worker) {
  SimWorker& w = *workers_[worker];
  LiveRequest& l = live_[i];
  engine::Request& r = *l.request;
  int64_t committed = 0;
  std::vector<BlockId> held;
  for (size_t k : l.pulling) {
    const BlockHash& hash = r.prompt_block_hashes[k];
    if (!w.pool.IsCached(hash)) {
      const std::optional<BlockId> block = w.pool.Allocate();
      if (!block.has_value()) break;  // the cache is full of running requests: compute the rest
      w.pool.Commit(*block, hash, k > 0 ? std::optional<BlockHash>(r.prompt_block_hashes[k - 1]) : std::nullopt);
      held.push_back(*block);
    }
    ++committed;
  }
  // Cached at the free list's tail, where the admission's prefix lookup finds them.
  for (auto b = held.rbegin(); b != held.rend(); ++b) w.pool.Release(*b);
  l.pulling.resize(static_cast<size_t>(committed));
  r.kv_loading = false;
  w.pending.Arrived(r.kv_pulling);
  r.kv_pulling.clear();
  blocks_pulled_ += committed;
  if (committed > 0) {
    const double per_block = (now_ - l.pull_started) / static_cast<double>(committed);
    double& smoothed = w.pull_seconds_per_block;
    smoothed = smoothed > 0 ? 0.8 * smoothed + 0.2 * per_block : per_block;
  }
  if (!r.params.kv_peer->lease_id.empty()) {
    SimWorker& source = *workers_[l.pull_source];
    if (source.leases.Release(r.params.kv_peer->lease_id)) Report(source);
    ++handoff_pulls_;
    handoff_pull_seconds_ += now_ - l.pull_started;
  }
  Report(w);
  if (!w.busy) StartStep(worker);
}

}  // namespace detail

PeerLinks::PeerLinks(int32_t workers, double gbps, double latency_s)
    : bytes_per_second_(BytesPerSecond(gbps)),
      latency_s_(latency_s),
      send_free_(static_cast<size_t>(std::max(workers, 0)), 0.0),
      receive_free_(static_cast<size_t>(std::max(workers, 0)), 0.0) {}

double PeerLinks::Pull(size_t source, size_t puller, int64_t bytes, double now) {
  // First come, first served on each side: a later pull never slips into a
  // gap before an earlier one's reservation, which slightly overstates the
  // queueing (fair sharing would overlap them at the same total rate).
  const double start = std::max({now + latency_s_, send_free_[source], receive_free_[puller]});
  const double end = start + static_cast<double>(bytes) / bytes_per_second_;
  send_free_[source] = receive_free_[puller] = end;
  return end;
}

PullCrossover PullCrossoverFor(const ClusterShape& cluster, int64_t kv_bytes_per_token, double network_gbps,
                               double pull_latency_s) {
  PullCrossover c{.network_gbps = network_gbps};
  const double block_bytes = static_cast<double>(kv_bytes_per_token) * cluster.block_size;
  c.pull_seconds_per_block = block_bytes / BytesPerSecond(network_gbps);
  c.prefill_seconds_per_block = cluster.block_size / cluster.PeakTokensPerSecond();
  const double saved_per_block = c.prefill_seconds_per_block - c.pull_seconds_per_block;
  if (!(saved_per_block > 0)) return c;
  // n blocks pay when latency + n·pull < n·prefill: n > latency / saved.
  c.min_blocks = static_cast<int64_t>(std::floor(pull_latency_s / saved_per_block)) + 1;
  // The prompt must hold n full blocks before its last token.
  c.min_prompt_tokens = c.min_blocks * cluster.block_size + 1;
  return c;
}

}  // namespace kvfleet::bench::placement_sim
