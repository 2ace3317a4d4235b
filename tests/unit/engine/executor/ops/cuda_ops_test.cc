// The op harness on the GPU (label gpu): every CUDA op against the float64
// reference and the CPU backend, and bit-exact batch invariance. Skipped,
// with the reason, where no GPU is usable.
#include "tests/unit/engine/executor/ops/cuda_op_backend.h"
#include "tests/unit/engine/executor/ops/op_harness_tests.h"

namespace kvfleet::engine::ops_test {
namespace {

INSTANTIATE_TEST_SUITE_P(Cuda, OpHarnessTest,
                         ::testing::Values(BackendParam{"cuda_0",
                                                        [](std::string* why) { return MakeCudaOpBackend(0, why); }}),
                         BackendName);

}  // namespace
}  // namespace kvfleet::engine::ops_test
