// A temporary directory removed with everything in it when the object dies.
//
//   TempDir dir;
//   std::string path = dir.Path("tiny.gguf");
#pragma once

#include <string>

namespace kvfleet::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace kvfleet::testing
