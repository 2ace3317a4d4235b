#include "engine/kv/tiers/kv_block_file.h"

#include <zlib.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kvfleet::engine {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'F', 'L', 'B', 'L', 'K', '1'};
constexpr uint32_t kVersion = 1;
// magic, version, identity length | identity | hash, flags, parent,
// payload bytes, payload crc, header crc.
constexpr size_t kFixedBefore = 8 + 4 + 4;
constexpr size_t kFixedAfter = 16 + 1 + 16 + 8 + 4 + 4;
constexpr uint8_t kHasParent = 1;
constexpr uint8_t kUnpublished = 2;

// Appends through a cursor into a buffer sized up front (GCC 12 warns
// falsely about vector::insert of small arrays).
struct Writer {
  uint8_t* p;
  void Bytes(const void* src, size_t n) {
    if (n > 0) std::memcpy(p, src, n);
    p += n;
  }
  template <typename T>
  void Int(T value) {
    for (size_t i = 0; i < sizeof(T); ++i) *p++ = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
  }
  void Hash(const BlockHash& h) {
    const std::string bytes = h.ToBytes();
    Bytes(bytes.data(), bytes.size());
  }
};

template <typename T>
T Get(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

BlockHash GetHash(const uint8_t* p) {
  return *BlockHash::FromBytes(std::string_view(reinterpret_cast<const char*>(p), 16));
}

}  // namespace

uint32_t KvBlockChecksum(std::span<const uint8_t> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed a large payload in pieces.
  constexpr size_t kPiece = size_t{1} << 30;
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const size_t n = std::min(kPiece, bytes.size() - at);
    crc = crc32(crc, bytes.data() + at, static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

size_t KvBlockHeaderBytes(std::string_view identity) { return kFixedBefore + identity.size() + kFixedAfter; }

std::string KvBlockFileName(const BlockHash& hash) { return hash.ToHex() + std::string(kKvBlockFileExtension); }

std::vector<uint8_t> EncodeKvBlockFile(std::string_view identity, const BlockHash& hash,
                                       const std::optional<BlockHash>& parent, std::span<const uint8_t> payload,
                                       bool published) {
  const size_t header = KvBlockHeaderBytes(identity);
  std::vector<uint8_t> out(header + payload.size());
  Writer w{out.data()};
  w.Bytes(kMagic, sizeof(kMagic));
  w.Int<uint32_t>(kVersion);
  w.Int<uint32_t>(static_cast<uint32_t>(identity.size()));
  w.Bytes(identity.data(), identity.size());
  w.Hash(hash);
  w.Int<uint8_t>(static_cast<uint8_t>((parent.has_value() ? kHasParent : 0) | (published ? 0 : kUnpublished)));
  w.Hash(parent.value_or(BlockHash{}));
  w.Int<uint64_t>(payload.size());
  w.Int<uint32_t>(KvBlockChecksum(payload));
  w.Int<uint32_t>(KvBlockChecksum(std::span<const uint8_t>(out.data(), header - 4)));
  w.Bytes(payload.data(), payload.size());
  return out;
}

absl::StatusOr<KvBlockFileHeader> DecodeKvBlockHeader(std::string_view identity, std::span<const uint8_t> bytes) {
  if (bytes.size() < kFixedBefore || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a kvfleet KV block file (bad magic)");
  }
  if (const uint32_t version = Get<uint32_t>(bytes.data() + 8); version != kVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("KV block file version ", version, ", this build reads ", kVersion));
  }
  const uint32_t identity_bytes = Get<uint32_t>(bytes.data() + 12);
  const size_t header = kFixedBefore + identity_bytes + kFixedAfter;
  if (bytes.size() < header) return absl::DataLossError("KV block file truncated inside its header");
  const uint8_t* p = bytes.data() + kFixedBefore + identity_bytes;
  const uint32_t header_crc = Get<uint32_t>(p + 16 + 1 + 16 + 8 + 4);
  if (header_crc != KvBlockChecksum(bytes.first(header - 4)))
    return absl::DataLossError("KV block file header checksum mismatch");
  const std::string_view written(reinterpret_cast<const char*>(bytes.data() + kFixedBefore), identity_bytes);
  if (written != identity) {
    return absl::FailedPreconditionError(absl::StrCat("KV block file written for '", std::string(written),
                                                      "', this worker is '", std::string(identity), "'"));
  }
  if ((p[16] & ~(kHasParent | kUnpublished)) != 0) {
    return absl::DataLossError(absl::StrCat("KV block file has unknown flags ", static_cast<int>(p[16])));
  }
  KvBlockFileHeader h{.hash = GetHash(p)};
  if ((p[16] & kHasParent) != 0) h.parent = GetHash(p + 17);
  h.published = (p[16] & kUnpublished) == 0;
  h.payload_bytes = Get<uint64_t>(p + 33);
  return h;
}

absl::StatusOr<std::span<const uint8_t>> DecodeKvBlockFile(std::string_view identity, const BlockHash& expected,
                                                           uint64_t payload_bytes, std::span<const uint8_t> bytes) {
  absl::StatusOr<KvBlockFileHeader> h = DecodeKvBlockHeader(identity, bytes);
  if (!h.ok()) return h.status();
  if (h->hash != expected) {
    return absl::NotFoundError(absl::StrCat("KV block file holds ", h->hash.ToHex(), ", expected ", expected.ToHex()));
  }
  const size_t header = KvBlockHeaderBytes(identity);
  if (h->payload_bytes != payload_bytes || bytes.size() != header + payload_bytes) {
    return absl::DataLossError(
        absl::StrCat("KV block file has ", bytes.size() - header, " payload bytes, expected ", payload_bytes));
  }
  const std::span<const uint8_t> payload = bytes.subspan(header);
  const uint32_t payload_crc = Get<uint32_t>(bytes.data() + header - 8);
  if (payload_crc != KvBlockChecksum(payload)) return absl::DataLossError("KV block file payload checksum mismatch");
  return payload;
}

}  // namespace kvfleet::engine
