#include "tests/testing/temp_dir.h"

#include <cstdlib>
#include <filesystem>

#include "common/check.h"

namespace kvfleet::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kvfleet-test-XXXXXX").string();
  CHECK(::mkdtemp(tmpl.data()) != nullptr) << "mkdtemp failed";
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace kvfleet::testing
