// The op harness on the CPU backend, at one and at three threads (the
// thread count must never change a bit).
#include "tests/unit/engine/executor/ops/cpu_op_backend.h"
#include "tests/unit/engine/executor/ops/op_harness_tests.h"

namespace kvfleet::engine::ops_test {
namespace {

INSTANTIATE_TEST_SUITE_P(
    Cpu, OpHarnessTest,
    ::testing::Values(BackendParam{"cpu_1_thread", [](std::string*) { return MakeCpuOpBackend(1); }},
                      BackendParam{"cpu_3_threads", [](std::string*) { return MakeCpuOpBackend(3); }}),
    BackendName);

}  // namespace
}  // namespace kvfleet::engine::ops_test
