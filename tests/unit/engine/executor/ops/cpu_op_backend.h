// The CPU backend's ops (CpuOps) behind the op harness's host interface.
#pragma once

#include <memory>

#include "tests/unit/engine/executor/ops/op_backend.h"

namespace kvfleet::engine::ops_test {

std::unique_ptr<OpBackend> MakeCpuOpBackend(int threads);

}  // namespace kvfleet::engine::ops_test
