// The KV transfer service's messages (proto/kvfleet/v1/kv_transfer.proto)
// to and from the engine's transport-free structs (engine/kv/transfer/):
// pure conversions, so the fuzzer and the tests run without a network.
//
// What a peer sends is input kvfleet does not control: every field is
// checked here (a hash that is not 16 bytes, a missing message body) and
// everything else by KvBlockAssembler and CheckKvTransferCompatible.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "common/block_hash.h"
#include "engine/kv/transfer/kv_block_stream.h"
#include "engine/kv/transfer/kv_transfer_identity.h"
#include "kvfleet/v1/kv_transfer.pb.h"

namespace kvfleet::worker {

void ToProto(const engine::KvTransferIdentity& identity, v1::KvTransferIdentity* out);
// A tensor-parallel degree of 0 (unset) is 1.
engine::KvTransferIdentity FromProto(const v1::KvTransferIdentity& identity);

// Copies the chunk's bytes into `out`.
void ToProto(const engine::KvBlockChunk& chunk, v1::KvBlockChunk* out);
// The chunk viewing `chunk`'s data (valid while `chunk` lives). DATA_LOSS
// for a hash or parent of the wrong length.
absl::StatusOr<engine::KvBlockChunk> FromProto(const v1::KvBlockChunk& chunk);

// The hashes a pull names. INVALID_ARGUMENT for none, more than
// `max_blocks`, or one that is not 16 bytes.
absl::StatusOr<std::vector<BlockHash>> HashesFromProto(const v1::PullBlocksRequest& request, int64_t max_blocks);

}  // namespace kvfleet::worker
