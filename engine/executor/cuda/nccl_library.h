// NCCL, loaded at run time: only a worker whose replica spans GPUs needs
// it, so the binary does not link it and a machine without it runs
// everything else. Built against the CUDA toolkit's nccl.h (its types and
// signatures); the library itself is the `nvidia-nccl-cu13` wheel's or the
// toolkit's, found by the dynamic loader (LD_LIBRARY_PATH) or named by
// KVFLEET_NCCL_LIBRARY. nccl_collective.h meets GPU ranks through it.
//
// Only NCCL's data-movement calls are bound: the ranks' sums are kvfleet's
// own, in rank order (engine/executor/collective.h), so no NCCL algorithm,
// protocol or channel choice can change a token.
//
// Thread-safety: Load is; the functions are NCCL's.
//
//   ASSIGN_OR_RETURN(const NcclLibrary* nccl, NcclLibrary::Load());
//   int version = nccl->version();  // 22809 for 2.28.9
#pragma once

#include <nccl.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kvfleet::engine {

class NcclLibrary {
 public:
  // The process's one NCCL, loaded on the first call; FAILED_PRECONDITION
  // naming the file asked for and how to get it when it is not there or
  // lacks a function. `path` (tests) overrides the search.
  static absl::StatusOr<const NcclLibrary*> Load();
  static absl::StatusOr<const NcclLibrary*> LoadFrom(const std::string& path);

  int version() const { return version_; }
  const std::string& path() const { return path_; }
  // "ncclInvalidUsage: ..." for a result of these functions.
  std::string Describe(ncclResult_t result) const;

  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommInitAll) CommInitAll = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;

 private:
  NcclLibrary() = default;
  static absl::StatusOr<std::unique_ptr<NcclLibrary>> Open(const std::string& path);

  std::string path_;
  int version_ = 0;
};

}  // namespace kvfleet::engine
