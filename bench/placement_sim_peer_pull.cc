// The simulator's network for peer KV pulls and the prompt length where a
// pull starts to pay (placement_sim.h).
#include <algorithm>
#include <cmath>

#include "bench/placement_sim.h"

namespace kvfleet::bench::placement_sim {

namespace {

// Gigabits per second as payload bytes per second (framing and protocol
// overhead left out: the link is as fast as its name).
double BytesPerSecond(double gbps) { return gbps * 1e9 / 8; }

}  // namespace

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
