// Computes the next-token masks of a step's constrained requests on its own
// thread while the engine thread runs the step's forward pass, so that a
// grammar's mask (a fraction of a millisecond on a 150k vocabulary) costs
// the step nothing when the forward pass is the longer of the two.
//
// Thread-safety: Start and Wait are called by the engine thread only, in
// pairs; between them the engine must not touch the constraints passed.
//
//   prefetcher.Start(constraints);
//   forward = executor.Forward(batch);
//   const double waited = prefetcher.Wait();  // masks ready; sample now
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/sampler/token_constraint.h"

namespace kvfleet::engine {

class MaskPrefetcher {
 public:
  MaskPrefetcher();
  ~MaskPrefetcher();
  MaskPrefetcher(const MaskPrefetcher&) = delete;
  MaskPrefetcher& operator=(const MaskPrefetcher&) = delete;

  // Starts preparing each constraint's mask; returns at once. Empty: no-op.
  void Start(std::vector<std::shared_ptr<TokenConstraint>> constraints);
  // Blocks until every mask Start asked for is ready; returns the seconds
  // it blocked (mask time the forward pass did not hide).
  double Wait();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<TokenConstraint>> work_;  // guarded by mu_
  bool busy_ = false;                                   // guarded by mu_
  bool stop_ = false;                                   // guarded by mu_
  std::thread thread_;                                  // started on the first Start
};

}  // namespace kvfleet::engine
