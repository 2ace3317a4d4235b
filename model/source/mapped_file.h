// A read-only memory mapping of a whole file. Owns the mapping; movable.
//
//   ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open("model.gguf"));
//   std::span<const uint8_t> bytes = f.bytes();
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace kvfleet::model {

class MappedFile {
 public:
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

  // Lets the kernel drop this process's pages that lie wholly inside
  // [data, data + size): for bytes a caller has copied and will not read
  // again. Reading them later still works (they come back from the file).
  // Ranges outside the mapping are ignored.
  void DropPages(const void* data, size_t size) const;
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}
  void Release();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvfleet::model
