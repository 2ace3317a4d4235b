// The one place that names a backend: every executor in the tree comes from
// CreateExecutor, and "auto" becomes a device here.
//
//   ASSIGN_OR_RETURN(Device device, ResolveDevice("auto"));   // cuda:0 if usable, else cpu
//   ASSIGN_OR_RETURN(auto ex, CreateExecutor(model, {.device = device}));
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/model_executor.h"
#include "model/model.h"

namespace kvfleet::engine {

// The CPU or CUDA executor for options.device. A CUDA device in a build
// without the CUDA backend, or one that is missing or unusable, is an error
// that says so.
absl::StatusOr<std::unique_ptr<ModelExecutor>> CreateExecutor(const model::Model& model,
                                                              const ExecutorOptions& options);

// The numerics identity (ExecutorInfo::numerics) the CPU backend of this
// build reports for a mode, without creating an executor: what a
// calibration record's entry must match to be used.
std::string CpuNumerics(CpuActivations activations, kernels::KvCacheDtype kv);

// "auto": GPU 0 when the CUDA backend is built and a GPU is usable, else the
// CPU, logging which and why. Anything else as ParseDevice, and a GPU named
// must be there: FAILED_PRECONDITION saying why not and what to use.
absl::StatusOr<Device> ResolveDevice(std::string_view spec);

// The usable GPUs' count (0 without the CUDA backend in this build or
// without a driver), and a line on why there are none: for logs and for
// tests that skip without a GPU.
int CudaDeviceCount(std::string* why_none = nullptr);

// One usable GPU as `kvfleet devices` lists it.
struct GpuDescription {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  int64_t total_memory = 0;
};

// Every usable GPU, in index order; empty, with why_none set, when there is
// none (or the build has no CUDA backend).
std::vector<GpuDescription> DescribeCudaDevices(std::string* why_none = nullptr);

// The NCCL a replica split across GPUs would load (KVFLEET_NCCL_LIBRARY, else
// libnccl.so.2 on the loader's path), as "NCCL 2.32.6 (libnccl.so.2)";
// FAILED_PRECONDITION saying why it cannot, and how to get one. Loading it
// needs no GPU, so an image can be checked on any machine.
absl::StatusOr<std::string> DescribeNccl();

}  // namespace kvfleet::engine
