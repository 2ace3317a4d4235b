// A fuzzer's input as a file the parsers open by path (they map their
// files), without touching the disk: a memfd, named /proc/self/fd/N.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvfleet::fuzz {

class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size);
  explicit MemoryFile(const std::string& text)
      : MemoryFile(reinterpret_cast<const uint8_t*>(text.data()), text.size()) {}
  ~MemoryFile();
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace kvfleet::fuzz
