// test_executor.h's model shapes, shared by every backend's implementation.
#include <cstdlib>
#include <string>

#include "tests/testing/test_executor.h"

namespace kvfleet::testing {

tools::TinyModelOptions SmolLm2Shape(tools::TinyModelOptions base) {
  base.num_layers = 30;
  base.hidden_size = 576;
  base.num_heads = 9;
  base.num_kv_heads = 3;
  base.ffn_size = 1536;
  base.rope_theta = 100000.0f;
  base.vocab_size = 49152;
  return base;
}

tools::TinyModelOptions ShapeFromEnvironment(const tools::TinyModelOptions& base, bool smollm2_by_default) {
  const char* env = std::getenv("KVFLEET_TEST_SHAPE");
  const std::string choice = env != nullptr ? env : "";
  const bool smollm2 = choice == "smollm2" || (choice != "tiny" && smollm2_by_default);
  return smollm2 ? SmolLm2Shape(base) : base;
}

}  // namespace kvfleet::testing
