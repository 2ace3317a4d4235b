// The simulator's step-time models and where their coefficients come from.
#include "absl/strings/str_cat.h"
#include "bench/placement_sim.h"

namespace kvfleet::bench::placement_sim {

absl::StatusOr<StepModel> NamedStepModel(const std::string& name) {
  if (name == "cpu") {
    // The default model (SmolLM2-135M) on this project's 2-core CI machine
    // with 2 threads, from bench/README.md's same-run CPU figures: decode
    // at 1 stream 115 tok/s (a ≈ 8.7 ms a step), at 8 streams 368 tok/s and
    // a 128-token prefill at 540 tok/s (b ≈ 1.7 ms a token); c from the
    // attention arithmetic (30 layers × 9 query heads × 64 × 2 multiply-adds
    // per cached token and row, ≈ 35 kFLOP, at the ~12 GFLOP/s these
    // kernels reach).
    return StepModel{.name = "cpu", .a = 0.0087, .b = 0.0017, .c = 3e-6};
  }
  if (name == "gpu") {
    // Llama-3-8B in bf16 on one H100 SXM, from its datasheet: reading the
    // 16 GB of weights at 3.35 TB/s takes 4.8 ms a step (+ ~1 ms of
    // launches: a = 6 ms); 16 GFLOP a token at 60% of 989 TFLOPS dense bf16
    // is 27 µs (b); 128 KiB of KV a cached token (32 layers × 8 KV heads ×
    // 128 × 2 × 2 bytes) read at 3.35 TB/s is 39 ns (c).
    return StepModel{.name = "gpu", .a = 0.006, .b = 2.7e-5, .c = 3.9e-8};
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown --step-model '", name, "': cpu or gpu"));
}

}  // namespace kvfleet::bench::placement_sim
