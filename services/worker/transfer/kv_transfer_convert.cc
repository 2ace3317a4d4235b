#include "services/worker/transfer/kv_transfer_convert.h"

#include "absl/strings/str_cat.h"

namespace kvfleet::worker {

void ToProto(const engine::KvTransferIdentity& identity, v1::KvTransferIdentity* out) {
  out->set_model_id(identity.model_id);
  out->set_numerics(identity.numerics);
  out->set_kv_dtype(identity.kv_dtype);
  out->set_block_size(identity.block_size);
  out->set_block_bytes(identity.block_bytes);
  out->set_page_groups(identity.page_groups);
  out->set_tensor_parallel(identity.tensor_parallel);
  out->set_adapter(identity.adapter);
}

engine::KvTransferIdentity FromProto(const v1::KvTransferIdentity& identity) {
  return {.model_id = identity.model_id(),
          .numerics = identity.numerics(),
          .kv_dtype = identity.kv_dtype(),
          .block_size = identity.block_size(),
          .block_bytes = identity.block_bytes(),
          .page_groups = identity.page_groups(),
          .tensor_parallel = identity.tensor_parallel() == 0 ? 1 : identity.tensor_parallel(),
          .adapter = identity.adapter()};
}

void ToProto(const engine::KvBlockChunk& chunk, v1::KvBlockChunk* out) {
  out->set_hash(chunk.hash.ToBytes());
  if (chunk.parent) out->set_parent(chunk.parent->ToBytes());
  out->set_unpublished(!chunk.published);
  out->set_block_bytes(chunk.block_bytes);
  out->set_offset(chunk.offset);
  out->set_crc32c(chunk.checksum);
  out->set_data(reinterpret_cast<const char*>(chunk.data.data()), chunk.data.size());
}

absl::StatusOr<engine::KvBlockChunk> FromProto(const v1::KvBlockChunk& chunk) {
  const std::optional<BlockHash> hash = BlockHash::FromBytes(chunk.hash());
  if (!hash) return absl::DataLossError(absl::StrCat("a KV chunk's hash has ", chunk.hash().size(), " bytes, not 16"));
  std::optional<BlockHash> parent;
  if (!chunk.parent().empty()) {
    parent = BlockHash::FromBytes(chunk.parent());
    if (!parent) {
      return absl::DataLossError(
          absl::StrCat("a KV chunk's parent hash has ", chunk.parent().size(), " bytes, not 16"));
    }
  }
  return engine::KvBlockChunk{.hash = *hash,
                              .parent = parent,
                              .published = !chunk.unpublished(),
                              .block_bytes = chunk.block_bytes(),
                              .offset = chunk.offset(),
                              .checksum = chunk.crc32c(),
                              .data = {reinterpret_cast<const uint8_t*>(chunk.data().data()), chunk.data().size()}};
}

absl::StatusOr<std::vector<BlockHash>> HashesFromProto(const v1::PullBlocksRequest& request, int64_t max_blocks) {
  const int64_t n = request.block_hashes_size();
  if (n == 0) return absl::InvalidArgumentError("a pull must name at least one block");
  if (n > max_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("a pull named ", n, " blocks; at most ", max_blocks, " per pull (ask for the rest in another)"));
  }
  std::vector<BlockHash> hashes;
  hashes.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const std::optional<BlockHash> h = BlockHash::FromBytes(request.block_hashes(i));
    if (!h) {
      return absl::InvalidArgumentError(
          absl::StrCat("block hash ", i, " of the pull has ", request.block_hashes(i).size(), " bytes, not 16"));
    }
    hashes.push_back(*h);
  }
  return hashes;
}

}  // namespace kvfleet::worker
