// The stream type the kernel launchers take, without the CUDA headers (host
// C++ that calls the launchers never includes them). It is cudaStream_t's
// underlying type; the emulation defines the struct itself.
//
// Also the inline namespace that keeps the two builds of kernels/cuda and
// executor/cuda apart: the same source compiled for the GPU declares its
// symbols in `device_build`, against the host emulation in `emulated_build`,
// so one binary can hold both and never mixes them.
#pragma once

struct CUstream_st;

#if defined(KVFLEET_CUDA_EMULATION)
#define KVFLEET_CUDA_BUILD emulated_build
#else
#define KVFLEET_CUDA_BUILD device_build
#endif

namespace kvfleet::cuda {

using Stream = CUstream_st*;

}  // namespace kvfleet::cuda
