// Which rows of the vocabulary an embedding table holds. A tensor-parallel
// rank holds one contiguous slice of it; every backend's embedding lookup
// gives a token outside its slice a row of zeros, so the ranks' rows sum
// (exactly: x + 0 = x) to the whole table's.
//
//   VocabSlice all{.rows = vocab};            // one rank: the whole table
//   VocabSlice mine{.first_row = 512, .rows = 512};
#pragma once

#include <cstdint>

namespace kvfleet::kernels {

struct VocabSlice {
  int64_t first_row = 0;
  int64_t rows = 0;

  bool Holds(int64_t id) const { return id >= first_row && id < first_row + rows; }
};

}  // namespace kvfleet::kernels
