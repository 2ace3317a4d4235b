#include "engine/executor/cuda/nccl_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace kvfleet::engine {

namespace {

constexpr char kDefaultLibrary[] = "libnccl.so.2";
constexpr char kHowToGet[] =
    "GPU ranks of one replica need NCCL: install the nvidia-nccl-cu13 wheel or the CUDA toolkit's NCCL and put its "
    "lib directory on LD_LIBRARY_PATH, or name the file with KVFLEET_NCCL_LIBRARY";

template <typename Fn>
bool Bind(void* handle, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (fn == nullptr) missing = name;
  return fn != nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclLibrary>> NcclLibrary::Open(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load NCCL from ", path, " (", why != nullptr ? why : "not found", "): ", kHowToGet));
  }
  std::unique_ptr<NcclLibrary> library(new NcclLibrary());
  library->path_ = path;
  std::string missing;
  decltype(&::ncclGetVersion) get_version = nullptr;
  if (!Bind(handle, "ncclGetVersion", get_version, missing) ||
      !Bind(handle, "ncclGetUniqueId", library->GetUniqueId, missing) ||
      !Bind(handle, "ncclCommInitRank", library->CommInitRank, missing) ||
      !Bind(handle, "ncclCommInitAll", library->CommInitAll, missing) ||
      !Bind(handle, "ncclCommDestroy", library->CommDestroy, missing) ||
      !Bind(handle, "ncclCommAbort", library->CommAbort, missing) ||
      !Bind(handle, "ncclAllGather", library->AllGather, missing) ||
      !Bind(handle, "ncclSend", library->Send, missing) || !Bind(handle, "ncclRecv", library->Recv, missing) ||
      !Bind(handle, "ncclGroupStart", library->GroupStart, missing) ||
      !Bind(handle, "ncclGroupEnd", library->GroupEnd, missing) ||
      !Bind(handle, "ncclGetErrorString", library->GetErrorString, missing)) {
    ::dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not an NCCL kvfleet can use: it has no ", missing, " (NCCL 2.18 or later has)"));
  }
  int version = 0;
  if (get_version(&version) != ncclSuccess || version < 21800) {
    ::dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is NCCL ", version, "; kvfleet needs 2.18 or later: ", kHowToGet));
  }
  library->version_ = version;
  return library;
}

absl::StatusOr<const NcclLibrary*> NcclLibrary::LoadFrom(const std::string& path) {
  // Once per path for the process's life: communicators hold its functions.
  static std::mutex mu;
  static std::map<std::string, absl::StatusOr<std::unique_ptr<NcclLibrary>>>* loaded =
      new std::map<std::string, absl::StatusOr<std::unique_ptr<NcclLibrary>>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(path);
  if (it == loaded->end()) it = loaded->emplace(path, Open(path)).first;
  if (!it->second.ok()) return it->second.status();
  return it->second->get();
}

absl::StatusOr<const NcclLibrary*> NcclLibrary::Load() {
  const char* named = std::getenv("KVFLEET_NCCL_LIBRARY");
  return LoadFrom(named != nullptr && *named != '\0' ? named : kDefaultLibrary);
}

std::string NcclLibrary::Describe(ncclResult_t result) const {
  return absl::StrCat("NCCL error ", static_cast<int>(result), ": ", GetErrorString(result));
}

}  // namespace kvfleet::engine
