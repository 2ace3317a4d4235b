// A KV block on the wire between workers: cut into chunks of bounded size
// (a message stays far under gRPC's limits however large a model's block
// is), each naming its block's hash, its place in the block and the whole
// block's CRC-32C (common/crc32c.h: in hardware, ~3x zlib's CRC-32). The receiver
// reassembles them in order and checks every block before it reaches a
// cache: a block that arrives is the sender's bytes or nothing.
//
// A stream carries the blocks asked for, in the order asked, each block's
// chunks in order (offset 0, then each chunk's end). The sender may stop
// early, after any whole block, when it no longer holds the next one: the
// receiver keeps the whole blocks it has and recomputes the rest.
//
//   for (const KvBlockChunk& c : SplitKvBlock(hash, parent, true, bytes, 1 << 20)) Send(c);
//
//   KvBlockAssembler in(hashes, format.block_bytes);
//   while (Receive(&c)) RETURN_IF_ERROR(in.Add(c));
//   RETURN_IF_ERROR(in.Finish());
//   for (KvBlockBytes& b : in.TakeCompleted()) ...
//
// Thread-safety: an assembler belongs to one stream's reader.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/block_hash.h"

namespace kvfleet::engine {

struct KvBlockChunk {
  BlockHash hash;
  std::optional<BlockHash> parent;
  bool published = true;     // false: a sliding-window group's page
  uint64_t block_bytes = 0;  // the whole block's size
  uint64_t offset = 0;       // where `data` starts in the block
  uint32_t checksum = 0;     // CRC-32C of the whole block
  std::span<const uint8_t> data;
};

// The chunks of one block, each at most `max_chunk_bytes` of data (> 0),
// viewing `block`.
std::vector<KvBlockChunk> SplitKvBlock(const BlockHash& hash, const std::optional<BlockHash>& parent, bool published,
                                       std::span<const uint8_t> block, uint64_t max_chunk_bytes);

struct KvBlockBytes {
  BlockHash hash;
  std::optional<BlockHash> parent;
  bool published = true;
  std::vector<uint8_t> bytes;
};

class KvBlockAssembler {
 public:
  // Expects blocks of `block_bytes` (> 0) with `hashes`, in that order.
  KvBlockAssembler(std::vector<BlockHash> hashes, uint64_t block_bytes);

  // The next chunk. DATA_LOSS for a chunk that does not continue the stream
  // (another hash than the next asked, an offset other than the end of
  // the last chunk, more bytes than the block, a checksum that changes
  // within a block or does not match the bytes at the block's end) and
  // FAILED_PRECONDITION for a block of another size; after an error every
  // later call returns it.
  absl::Status Add(const KvBlockChunk& chunk);
  // At the end of the stream: DATA_LOSS when a block stopped part way.
  absl::Status Finish() const;

  // The blocks completed since the last call, in order.
  std::vector<KvBlockBytes> TakeCompleted();
  int64_t blocks_completed() const { return next_; }
  int64_t blocks_asked() const { return static_cast<int64_t>(hashes_.size()); }

 private:
  absl::Status Fail(absl::Status status);

  std::vector<BlockHash> hashes_;
  uint64_t block_bytes_;
  int64_t next_ = 0;                        // index of the block being received
  std::optional<KvBlockBytes> current_;     // its bytes so far
  uint32_t current_checksum_ = 0;
  std::vector<KvBlockBytes> completed_;
  absl::Status error_;
};

}  // namespace kvfleet::engine
