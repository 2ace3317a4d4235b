#include "model/model_fingerprint.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/write_file.h"

namespace kvfleet::model {
namespace {

constexpr char kRecordFormat[] = "kvfleet-fingerprint-v1";

// One line per weight file: its absolute path, size and modification time
// (nanoseconds). Empty when a file cannot be looked at: nothing is cached.
std::string FilesKey(const Model& model) {
  std::string key;
  for (const std::string& file : model.source().weight_files()) {
    std::error_code ec;
    const std::filesystem::path path = std::filesystem::absolute(file, ec);
    if (ec) return "";
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return "";
    const auto modified = std::filesystem::last_write_time(path, ec);
    if (ec) return "";
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(modified.time_since_epoch()).count();
    absl::StrAppend(&key, path.string(), "\t", size, "\t", ns, "\n");
  }
  return key;
}

// The record: the format, the key (lines ending in newlines), then the
// fingerprint and a newline.
std::string RecordHead(const std::string& key) { return absl::StrCat(kRecordFormat, "\n", key); }

}  // namespace

std::string ModelFingerprint(const Model& model) {
  std::vector<const TensorView*> tensors;
  for (const TensorView& t : model.source().tensors()) tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(), [](const TensorView* a, const TensorView* b) { return a->name < b->name; });
  Sha256 sha;
  for (const TensorView* t : tensors) {
    std::string header = absl::StrCat(t->name, "|", static_cast<int>(t->dtype), "|");
    for (int64_t d : t->shape) absl::StrAppend(&header, d, ",");
    absl::StrAppend(&header, "|", t->num_bytes, "\n");
    sha.Update(header.data(), header.size());
    sha.Update(t->data, static_cast<size_t>(t->num_bytes));
  }
  return sha.HexDigest();
}

std::string CachedModelFingerprint(const Model& model, const std::string& cache_dir) {
  const std::string key = cache_dir.empty() ? "" : FilesKey(model);
  if (key.empty()) return ModelFingerprint(model);
  Sha256 name;
  name.Update(key.data(), key.size());
  const std::filesystem::path dir = std::filesystem::path(cache_dir) / "fingerprints";
  const std::filesystem::path path = dir / name.HexDigest();
  {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string record = text.str();
    const std::string head = RecordHead(key);
    // The fingerprint is 64 hex digits and a newline after the key.
    if (record.size() == head.size() + 65 && record.compare(0, head.size(), head) == 0) {
      return record.substr(head.size(), 64);
    }
  }
  const std::string fingerprint = ModelFingerprint(model);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path temp = path.string() + ".tmp." + std::to_string(::getpid());
  absl::Status written =
      ec ? absl::PermissionDeniedError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()))
         : WriteFile(temp, absl::StrCat(RecordHead(key), fingerprint, "\n"));
  if (written.ok()) {
    std::filesystem::rename(temp, path, ec);
    if (ec) written = absl::PermissionDeniedError(absl::StrCat("cannot rename into ", path.string()));
  }
  if (!written.ok()) {
    std::filesystem::remove(temp, ec);
    KVFLEET_LOG_INFO("the model's fingerprint is not cached ({}); the next start computes it again",
                     std::string(written.message()));
  }
  return fingerprint;
}

}  // namespace kvfleet::model
