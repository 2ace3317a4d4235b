// What two workers must agree on before one copies KV blocks from the
// other: everything that decides a block's bytes and how a cache reads
// them. A block is only ever copied into a cache of the same identity; any
// difference refuses the whole transfer, naming the field and both sides'
// values, so a layout or scale-format mismatch can never become silently
// wrong tokens.
//
//   model_id        the model fingerprint block hashes chain from
//   numerics        the executor's numerics identity: backend kernels, KV
//                   dtype and, for scaled keys, the scales' digest
//   kv_dtype        the KV format's name (said apart from numerics so a
//                   refusal names it plainly)
//   block_size      tokens a block holds
//   block_bytes     one block's bytes over every layer (scales included)
//   page_groups     a sliding-window model's page layout
//                   (DescribeKvPageGroups); empty for one group
//   tensor_parallel ranks the model is split across (a block holds
//                   every rank's share; numerics names the split too)
//   adapter         the LoRA adapter the pulled blocks were computed under,
//                   "name@digest" (empty: the base model). A worker's own
//                   identity leaves it empty; each pull names its request's
//                   and the peer's answer repeats it. The block hashes are
//                   salted with it already, so this is the handshake's
//                   plain statement of it: a peer that does not repeat it
//                   is refused, and a refusal names it.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace kvfleet::engine {

struct KvTransferIdentity {
  std::string model_id;
  std::string numerics;
  std::string kv_dtype;
  int64_t block_size = 0;
  int64_t block_bytes = 0;
  std::string page_groups;
  int32_t tensor_parallel = 1;
  std::string adapter;
};

// OK when a block of `theirs` may be copied into a cache of `ours`; else
// FAILED_PRECONDITION naming every field that differs with both values.
absl::Status CheckKvTransferCompatible(const KvTransferIdentity& ours, const KvTransferIdentity& theirs);

// OK when `adapter` is empty or an adapter identity: a name of 1 to 128
// bytes, "@", and a SHA-256 digest in 64 lowercase hex digits; else
// INVALID_ARGUMENT saying so.
absl::Status CheckKvAdapterIdentity(std::string_view adapter);

// A page layout in one string: "3 layers per page; windows 0,512,512"
// (window 0: full attention). Empty for a single group of every layer.
std::string DescribeKvPageGroups(int32_t layers_per_page, std::span<const int64_t> group_windows);

}  // namespace kvfleet::engine
