#include "engine/kv/transfer/kv_transfer_identity.h"

#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvfleet::engine {
namespace {

template <typename T>
void Compare(const char* field, const T& ours, const T& theirs, std::vector<std::string>& differences) {
  if (ours == theirs) return;
  differences.push_back(absl::StrCat(field, ": here \"", ours, "\", peer \"", theirs, "\""));
}

}  // namespace

absl::Status CheckKvTransferCompatible(const KvTransferIdentity& ours, const KvTransferIdentity& theirs) {
  std::vector<std::string> differences;
  Compare("model", ours.model_id, theirs.model_id, differences);
  Compare("numerics", ours.numerics, theirs.numerics, differences);
  Compare("KV dtype", ours.kv_dtype, theirs.kv_dtype, differences);
  Compare("block size (tokens)", ours.block_size, theirs.block_size, differences);
  Compare("block bytes", ours.block_bytes, theirs.block_bytes, differences);
  Compare("page groups", ours.page_groups, theirs.page_groups, differences);
  Compare("tensor-parallel degree", ours.tensor_parallel, theirs.tensor_parallel, differences);
  Compare("adapter", ours.adapter, theirs.adapter, differences);
  if (differences.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("KV blocks cannot move between these workers: ", absl::StrJoin(differences, "; "),
                   ". Both must run the same model file, backend, KV format and block size; the request "
                   "recomputes its prefix instead."));
}

absl::Status CheckKvAdapterIdentity(std::string_view adapter) {
  if (adapter.empty()) return absl::OkStatus();
  const size_t at = adapter.rfind('@');
  const std::string_view name = at == std::string_view::npos ? std::string_view() : adapter.substr(0, at);
  const std::string_view digest = at == std::string_view::npos ? adapter : adapter.substr(at + 1);
  const bool hex = digest.size() == 64 &&
                   absl::c_all_of(digest, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (at == std::string_view::npos || name.empty() || name.size() > 128 || !hex) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pull's adapter identity \"", std::string(adapter.substr(0, 200)),
                     "\" is not name@digest (a name of 1 to 128 bytes and a SHA-256 digest in 64 lowercase hex "
                     "digits); the puller is out of date or damaged"));
  }
  return absl::OkStatus();
}

std::string DescribeKvPageGroups(int32_t layers_per_page, std::span<const int64_t> group_windows) {
  if (group_windows.size() <= 1) return "";
  return absl::StrCat(layers_per_page, " layers per page; windows ", absl::StrJoin(group_windows, ","));
}

}  // namespace kvfleet::engine
