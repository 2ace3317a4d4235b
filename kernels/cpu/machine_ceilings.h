// What this machine can do at most, measured in the same run as a
// benchmark so its figures can be stated as a share of the limit: memory
// read bandwidth over a buffer far larger than the caches (STREAM-style),
// float32 FMA throughput, and int8 multiply-add throughput with the dot
// instructions the integer matmul uses (matmul_q8.h). Every thread of the
// pool runs at once; each figure is the best of a few passes.
//
//   MachineCeilings c = MeasureMachineCeilings(pool);
//   double decode_bound = c.read_bytes_per_s / weight_bytes_per_token;
#pragma once

#include <cstddef>
#include <string>

#include "common/thread_pool.h"

namespace kvfleet::kernels {

struct MachineCeilings {
  double read_bytes_per_s = 0;  // all threads reading, each its own slice
  double fma_flops_per_s = 0;   // float32, 2 flops per lane per FMA, the float matmul's instruction set
  std::string fma_isa;          // "avx2" or "avx512"
  double int8_macs_per_s = 0;   // int8 multiply-adds, the active Q8 dot instruction set
  std::string int8_isa;         // "avx2" or "avx512-vnni"
};

MachineCeilings MeasureMachineCeilings(ThreadPool& pool, size_t buffer_bytes = size_t{256} << 20);

}  // namespace kvfleet::kernels
