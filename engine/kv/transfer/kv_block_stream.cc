#include "engine/kv/transfer/kv_block_stream.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/crc32c.h"

namespace kvfleet::engine {

std::vector<KvBlockChunk> SplitKvBlock(const BlockHash& hash, const std::optional<BlockHash>& parent, bool published,
                                       std::span<const uint8_t> block, uint64_t max_chunk_bytes) {
  CHECK(max_chunk_bytes > 0) << "a chunk must hold at least one byte";
  const uint32_t checksum = Crc32c(block);
  std::vector<KvBlockChunk> chunks;
  uint64_t offset = 0;
  do {
    const uint64_t n = std::min<uint64_t>(max_chunk_bytes, block.size() - offset);
    chunks.push_back({.hash = hash,
                      .parent = parent,
                      .published = published,
                      .block_bytes = block.size(),
                      .offset = offset,
                      .checksum = checksum,
                      .data = block.subspan(offset, n)});
    offset += n;
  } while (offset < block.size());
  return chunks;
}

KvBlockAssembler::KvBlockAssembler(std::vector<BlockHash> hashes, uint64_t block_bytes)
    : hashes_(std::move(hashes)), block_bytes_(block_bytes) {
  CHECK(block_bytes_ > 0) << "a KV block has bytes";
}

absl::Status KvBlockAssembler::Fail(absl::Status status) {
  error_ = status;
  current_.reset();
  return status;
}

absl::Status KvBlockAssembler::Add(const KvBlockChunk& chunk) {
  if (!error_.ok()) return error_;
  if (next_ >= blocks_asked()) {
    return Fail(absl::DataLossError(
        absl::StrCat("the peer sent block ", chunk.hash.ToHex(), " after all ", blocks_asked(), " blocks asked for")));
  }
  const BlockHash& expected = hashes_[next_];
  if (chunk.hash != expected) {
    return Fail(absl::DataLossError(absl::StrCat("the peer sent block ", chunk.hash.ToHex(), " where block ", next_,
                                                 " of the request, ", expected.ToHex(), ", was due")));
  }
  if (chunk.block_bytes != block_bytes_) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "the peer's block ", expected.ToHex(), " has ", chunk.block_bytes, " bytes; blocks here have ", block_bytes_)));
  }
  const uint64_t have = current_ ? current_->bytes.size() : 0;
  if (chunk.offset != have) {
    return Fail(absl::DataLossError(absl::StrCat("block ", expected.ToHex(), ": a chunk at byte ", chunk.offset,
                                                 " where byte ", have, " was due (lost or reordered in flight)")));
  }
  if (chunk.data.empty() || chunk.data.size() > block_bytes_ - have) {
    return Fail(absl::DataLossError(absl::StrCat("block ", expected.ToHex(), ": a chunk of ", chunk.data.size(),
                                                 " bytes at byte ", have, " of ", block_bytes_)));
  }
  if (!current_) {
    current_ = KvBlockBytes{.hash = chunk.hash, .parent = chunk.parent, .published = chunk.published};
    current_->bytes.reserve(block_bytes_);
    current_checksum_ = chunk.checksum;
  } else if (chunk.checksum != current_checksum_ || chunk.parent != current_->parent ||
             chunk.published != current_->published) {
    return Fail(absl::DataLossError(
        absl::StrCat("block ", expected.ToHex(), ": its chunks disagree on the block's checksum or header")));
  }
  current_->bytes.insert(current_->bytes.end(), chunk.data.begin(), chunk.data.end());
  if (current_->bytes.size() < block_bytes_) return absl::OkStatus();
  if (Crc32c(current_->bytes) != current_checksum_) {
    return Fail(absl::DataLossError(
        absl::StrCat("block ", expected.ToHex(), ": checksum mismatch (damaged in flight); nothing of it is kept")));
  }
  completed_.push_back(std::move(*current_));
  current_.reset();
  ++next_;
  return absl::OkStatus();
}

absl::Status KvBlockAssembler::Finish() const {
  if (!error_.ok()) return error_;
  if (current_) {
    return absl::DataLossError(absl::StrCat("the stream ended inside block ", current_->hash.ToHex(), " after ",
                                            current_->bytes.size(), " of its ", block_bytes_, " bytes"));
  }
  return absl::OkStatus();
}

std::vector<KvBlockBytes> KvBlockAssembler::TakeCompleted() {
  std::vector<KvBlockBytes> out;
  out.swap(completed_);
  return out;
}

}  // namespace kvfleet::engine
