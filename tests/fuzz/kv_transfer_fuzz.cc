// The KV transfer stream as a peer, or anyone who can reach the transfer
// port, might send it: a sequence of PullBlocksResponse messages (the
// server's identity, then block chunks) in any order and any state of
// damage, read the way the puller reads them (kv_transfer_convert.h, then
// KvBlockAssembler and CheckKvTransferCompatible). Properties: a completed
// block is one asked for, in the asked order, of the block size, with the
// checksum its chunks carried; nothing completes after an error, and an
// identity is compatible only when it equals ours.
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "services/worker/transfer/kv_transfer_convert.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using namespace kvfleet;

engine::KvTransferIdentity Ours() {
  return {.model_id = "m", .numerics = "cpu/1", .kv_dtype = "f16", .block_size = 16, .block_bytes = 8};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::FuzzInput in(data, size);
  const uint64_t block_bytes = 1 + in.Byte() % 32;
  const int asked = 1 + in.Byte() % 4;
  std::vector<BlockHash> hashes;
  for (int i = 0; i < asked; ++i) hashes.push_back({.hi = 0, .lo = static_cast<uint64_t>(i + 1)});
  engine::KvBlockAssembler assembler(hashes, block_bytes);
  int64_t completed = 0;
  bool failed = false;
  while (!in.empty()) {
    v1::PullBlocksResponse message;
    if (!message.ParseFromString(in.String(255))) continue;
    if (message.has_identity()) {
      const engine::KvTransferIdentity theirs = worker::FromProto(message.identity());
      const bool compatible = engine::CheckKvTransferCompatible(Ours(), theirs).ok();
      fuzz::Check(compatible == (theirs.model_id == "m" && theirs.numerics == "cpu/1" && theirs.kv_dtype == "f16" &&
                                 theirs.block_size == 16 && theirs.block_bytes == 8 && theirs.page_groups.empty() &&
                                 theirs.tensor_parallel == 1 && theirs.adapter.empty()),
                  "compatible exactly when every field is ours");
      continue;
    }
    if (!message.has_chunk()) continue;
    absl::StatusOr<engine::KvBlockChunk> chunk = worker::FromProto(message.chunk());
    if (!chunk.ok()) continue;
    const absl::Status added = assembler.Add(*chunk);
    fuzz::Check(!(failed && added.ok()), "a failed stream stays failed");
    failed = failed || !added.ok();
    for (const engine::KvBlockBytes& b : assembler.TakeCompleted()) {
      fuzz::Check(completed < asked && b.hash == hashes[completed], "blocks complete in the order asked");
      fuzz::Check(b.bytes.size() == block_bytes, "a completed block has the block size");
      fuzz::Check(Crc32c(b.bytes) == chunk->checksum, "a completed block matches its checksum");
      ++completed;
    }
  }
  fuzz::Check(assembler.blocks_completed() == completed, "every completed block is handed over once");
  if (failed) fuzz::Check(!assembler.Finish().ok(), "a failed stream does not finish");
  return 0;
}
