// The ranks of one tensor-parallel replica as threads of one process,
// taking turns: one rank runs at a time, from one meeting point to the
// next, so the ranks share the machine's cores (each rank's kernels use
// every thread of its pool while it holds the turn). This is the CPU
// twin's transport and the CUDA emulation's, and how one replica could
// span the sockets of a CPU host.
//
// A round (one forward pass on every rank) goes rank 0, 1, …, N−1 up to the
// first collective; the last rank to arrive computes it for all (the sum in
// rank order, collective.h) and hands the turn back to rank 0, and so on to
// the end of the round. The turns make the order of every operation fixed,
// not only the sums'.
//
// Thread-safety: each rank's thread calls BeginTurn, its Collective's
// methods and EndTurn, in that order, once per round.
//
//   InProcessGroup group(2);
//   // on rank r's thread:
//   group.BeginTurn(r);
//   RunForward(..., group.rank(r));  // calls AllReduce and AllGather
//   group.EndTurn(r);
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/executor/collective.h"

namespace kvfleet::engine {

class InProcessGroup {
 public:
  // What the meetings have cost since the group was made: for the
  // benchmark's share of a step (bench/tp_twin_bench.cc).
  struct Costs {
    int64_t meetings = 0;        // collectives, each counted once
    int64_t message_bytes = 0;   // Σ one rank's buffer: what each rank sends
    double meet_seconds = 0;     // the last rank's sums and copies
    double handoff_seconds = 0;  // from passing the turn to the next rank running
  };

  explicit InProcessGroup(int32_t size);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int32_t size() const { return static_cast<int32_t>(ranks_.size()); }
  Collective& rank(int32_t r);

  // Blocks until rank r holds the turn; rank 0 holds it when a round starts.
  void BeginTurn(int32_t r);
  // Rank r's part of the round is done: the turn passes to the next rank.
  void EndTurn(int32_t r);

  // Thread-safe; exact once a round has ended.
  Costs costs();

  // A rank failed: from now on collectives return with their buffers
  // untouched (what NCCL's communicator abort does), and the turns go
  // round only the ranks still running, so none waits for the failed one
  // (which ends its turn at once). The replica's results are garbage from
  // here: its executor must fault. Thread-safe; for good.
  void Abort();

 private:
  class Rank;
  // Rank r has put its buffer (`floats` of it its message) on the table:
  // the last rank computes `meet` over every rank's buffer, then the turn
  // goes round again.
  template <class Meet>
  void Arrive(int32_t r, float* x, int64_t width, int64_t floats, Meet meet);
  // Gives the turn to `next` (nothing when it is r) and waits for r's next turn.
  void PassTurnAndWait(std::unique_lock<std::mutex>& lock, int32_t r, int32_t next);
  // The rank after r, cyclically, that has not ended this round; r if none.
  int32_t NextTurn(int32_t r) const;

  std::vector<std::unique_ptr<Rank>> ranks_;
  std::mutex mu_;
  std::condition_variable turn_changed_;
  int32_t turn_ = 0;
  bool aborted_ = false;
  std::vector<bool> done_;                             // ranks that ended this round's turn
  std::chrono::steady_clock::time_point turn_passed_;  // when turn_ last changed
  Costs costs_;
  // The meeting in progress: each rank's buffer and width, and where the
  // last rank assembles the result before copying it to every rank.
  std::vector<float*> buffers_;
  std::vector<int64_t> widths_;
  std::vector<float> staging_;
};

}  // namespace kvfleet::engine
