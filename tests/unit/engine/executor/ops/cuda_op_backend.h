// The CUDA backend's ops (CudaOps) behind the op harness's host interface.
// The same source serves the real GPU build and the host emulation; which
// one a test binary gets is the library it links.
#pragma once

#include <memory>
#include <string>

#include "kernels/cuda/stream.h"
#include "tests/unit/engine/executor/ops/op_backend.h"

namespace kvfleet::engine::ops_test {
inline namespace KVFLEET_CUDA_BUILD {

// Null, with the reason in *why, when no usable device is there.
std::unique_ptr<OpBackend> MakeCudaOpBackend(int device, std::string* why);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine::ops_test
