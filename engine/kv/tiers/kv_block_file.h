// The disk tier's file format: one file per KV block, a header that says
// what the bytes are and a checksum of them, then the block's bytes (the
// executor's CopyKvBlockOut layout).
//
//   magic "KVFLBLK1" | version u32 | identity length u32 | identity bytes
//   | block hash (16) | flags u8 | parent hash (16) | payload bytes u64
//   | payload crc32 u32 | header crc32 u32 | payload
//
// flags: bit 0, the parent hash is set; bit 1, the block is unpublished (a
// sliding-window group's page, cached under a hash derived from its
// block's: never announced to the cluster, after a restart too).
//
// Integers little-endian. The identity names everything that decides the
// bytes: model id, numerics identity (backend, kernels, KV dtype), block
// size and block bytes. A file whose identity differs was written by
// another model or build: foreign, never read as ours. The tenant's cache
// salt is committed in the block hash itself (hashes chain from the model id
// and salt), and a read must name the hash it expects, so one tenant's
// block can never answer another's lookup.
//
// Decode refuses (never trusts) a wrong magic or version, a foreign identity,
// a hash other than the one asked for, a truncated file and a checksum
// mismatch, each with its own message.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/block_hash.h"

namespace kvfleet::engine {

struct KvBlockFileHeader {
  BlockHash hash;
  std::optional<BlockHash> parent;
  bool published = true;
  uint64_t payload_bytes = 0;
};

// The whole file: header then payload.
std::vector<uint8_t> EncodeKvBlockFile(std::string_view identity, const BlockHash& hash,
                                       const std::optional<BlockHash>& parent, std::span<const uint8_t> payload,
                                       bool published = true);

// Checks the header alone (a restart's scan reads only headers): magic,
// version, identity, header checksum. DATA_LOSS for damage, FAILED_PRECONDITION
// for a foreign identity.
absl::StatusOr<KvBlockFileHeader> DecodeKvBlockHeader(std::string_view identity, std::span<const uint8_t> bytes);

// The payload of a complete file after checking all of it against the
// expected hash and payload size. Same codes as DecodeKvBlockHeader, and
// NOT_FOUND when the file holds another hash.
absl::StatusOr<std::span<const uint8_t>> DecodeKvBlockFile(std::string_view identity, const BlockHash& expected,
                                                           uint64_t payload_bytes, std::span<const uint8_t> bytes);

// The size of a file's header for `identity`: what a scan reads.
size_t KvBlockHeaderBytes(std::string_view identity);

// CRC-32 (zlib's) of a block's bytes: the file's checksum, and a block's
// on the wire between workers (engine/kv/transfer).
uint32_t KvBlockChecksum(std::span<const uint8_t> bytes);

// The file name of a block: its hash in hex, with the format's extension.
std::string KvBlockFileName(const BlockHash& hash);
inline constexpr std::string_view kKvBlockFileExtension = ".kvblock";

}  // namespace kvfleet::engine
