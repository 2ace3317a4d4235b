// What the lower KV tiers need from whatever holds the device cache: a
// block's bytes out and back, and the facts that decide those bytes. The
// tiers see this, not the executor; engine/executor_kv_tiers.h adapts an
// executor to it (a peer transfer path can implement it too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "common/ids.h"

namespace kvfleet::engine {

class KvBlockCopier {
 public:
  virtual ~KvBlockCopier() = default;
  // One device block's K and V over every layer (KvBlockFormat::block_bytes
  // bytes), and back. Bit-exact both ways; between steps only.
  virtual absl::Status CopyKvBlockOut(BlockId block, std::span<uint8_t> out) = 0;
  virtual absl::Status CopyKvBlockIn(BlockId block, std::span<const uint8_t> in) = 0;
};

// A block's size and everything besides the model that decides its bytes:
// a disk file that differs in any of it was written by another kernel or
// geometry.
struct KvBlockFormat {
  int64_t block_bytes = 0;  // 0: the cache cannot be copied
  int64_t block_size = 0;   // tokens a block holds
  std::string numerics;     // kernels and KV dtype
};

// Host memory for the host tier, `bytes` long (page-locked on a GPU, so
// copies are DMA); null when there is not that much.
using HostMemoryAllocator = std::function<std::shared_ptr<uint8_t>(size_t bytes)>;

}  // namespace kvfleet::engine
