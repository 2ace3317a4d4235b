// The op harness on the CUDA kernels compiled against the host emulation
// (CI has no GPU): their indexing, barriers and reduction orders, fibers in
// the usual order and reversed (a missing barrier would change a result).
// The device math library is not emulated: tolerances, not bits, against
// the reference.
#include "kernels/cuda/emulation/emulated_cuda.h"
#include "tests/unit/engine/executor/ops/cuda_op_backend.h"
#include "tests/unit/engine/executor/ops/op_harness_tests.h"

namespace kvfleet::engine::ops_test {
namespace {

std::unique_ptr<OpBackend> Emulated(bool reversed, std::string* why) {
  cuda_emu::SetReverseOrder(reversed);
  return MakeCudaOpBackend(0, why);
}

INSTANTIATE_TEST_SUITE_P(
    CudaEmulated, OpHarnessTest,
    ::testing::Values(BackendParam{"cuda_emulated", [](std::string* why) { return Emulated(false, why); }},
                      BackendParam{"cuda_emulated_reversed", [](std::string* why) { return Emulated(true, why); }}),
    BackendName);

}  // namespace
}  // namespace kvfleet::engine::ops_test
