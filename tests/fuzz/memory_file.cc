#include "tests/fuzz/memory_file.h"

#include <sys/mman.h>
#include <unistd.h>

namespace kvfleet::fuzz {

MemoryFile::MemoryFile(const uint8_t* data, size_t size) : fd_(memfd_create("fuzz-input", 0)) {
  size_t written = 0;
  while (fd_ >= 0 && written < size) {
    const ssize_t n = write(fd_, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
}

MemoryFile::~MemoryFile() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace kvfleet::fuzz
