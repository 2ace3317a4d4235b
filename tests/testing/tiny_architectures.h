// Every architecture of the registry (model/arch/) as a tiny model, for
// tests that must hold on each: a folder added under model/arch/ joins them
// with no edit here. Llama comes with Llama 3's scaled RoPE (plain Llama is
// every other test's tiny model), and an architecture with windowed layers
// gets layers enough for a global one too, so both kinds run.
//
//   INSTANTIATE_TEST_SUITE_P(Tiny, MyTest, ValuesIn(TinyArchitectures({.seed = 31})), ...);
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::testing {

struct TinyArchitecture {
  std::string name;  // the registry's, or "llama3"
  tools::TinyModelOptions options;
};

inline void PrintTo(const TinyArchitecture& a, std::ostream* os) { *os << a.name; }

// `base` (its architecture and layer count overridden) once per
// architecture, each with its own seed: base.seed + its index.
std::vector<TinyArchitecture> TinyArchitectures(const tools::TinyModelOptions& base);

}  // namespace kvfleet::testing
