#include "tests/fuzz/fuzz_input.h"

#include <cstdio>
#include <cstdlib>

namespace kvfleet::fuzz {

void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz property failed: %s\n", what.c_str());
  std::abort();
}

}  // namespace kvfleet::fuzz
