// One rank's side of the collectives a tensor-parallel replica meets at
// (model/arch/op_set.h's AllReduce and AllGather): the layer sequence on
// each rank calls them at the same places, in the same order.
//
// The sum is taken in rank order, ((x₀ + x₁) + x₂) + …, for every message
// size, so a replica's tokens do not depend on how a transport moves the
// bytes: whatever carries them (threads of one process, NCCL's
// data-movement collectives) does no arithmetic of its own.
//
// Pointers are in the backend's memory (host for the CPU and the CUDA
// emulation). One thread per rank; all ranks must call every collective.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace kvfleet::engine {

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;

  // x[0, count) ← Σ over the ranks' x, in rank order, on every rank.
  virtual void AllReduce(float* x, int64_t count) = 0;
  // x holds [rows, width] of this rank's columns (widths may differ by
  // rank); afterwards [rows, Σ widths], each rank's columns in rank order.
  // x must have room for the whole.
  virtual void AllGather(float* x, int64_t rows, int64_t width) = 0;
  // The first failure of a collective (a transport's error; the buffers are
  // then garbage), OK otherwise. The in-process group's never fail.
  virtual absl::Status status() const { return absl::OkStatus(); }
  // Another rank failed: from now on this rank's collectives return at
  // once, buffers untouched, so it never waits for the failed one. Callable
  // from any thread; for good.
  virtual void Abort() = 0;
};

}  // namespace kvfleet::engine
