// One thread per rank of a tensor-parallel replica, kept for the
// executor's life: a rank's kernels keep their per-thread scratch across
// steps, and every rank of a step runs at once (a collective needs all of
// them; the ranks' own turn-taking, if any, is theirs). Rank 0 runs on the
// calling thread.
//
// Thread-safety: Run from one thread at a time.
//
//   RankThreads threads(3);
//   threads.Run([&](int32_t rank) { statuses[rank] = ranks[rank]->Forward(batch).status(); });
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace kvfleet::engine {

class RankThreads {
 public:
  explicit RankThreads(int32_t ranks);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  // fn(r) for every rank r, concurrently; returns when all have returned.
  // Allocates nothing (a step's Forward runs through it).
  void Run(absl::FunctionRef<void(int32_t)> fn);

 private:
  void Loop(int32_t rank);

  std::vector<std::thread> threads_;  // ranks 1..N−1
  std::mutex mu_;
  std::condition_variable changed_;
  const absl::FunctionRef<void(int32_t)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int32_t running_ = 0;
  bool stop_ = false;
};

}  // namespace kvfleet::engine
