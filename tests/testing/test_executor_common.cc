// The parts of test_executor.h every backend's implementation shares: the
// tiny executors (over the backend's NewExecutor) and the model shapes.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "tests/testing/test_executor.h"

namespace kvfleet::testing {

int64_t PagesForBlocks(const model::Model& model, int64_t blocks, bool free_window_blocks) {
  return blocks * model::KvPageGroupsFor(model.config(), free_window_blocks).num_groups();
}

std::unique_ptr<engine::ModelExecutor> NewTinyExecutor(const model::Model& model, int64_t num_blocks,
                                                       int64_t block_size, int threads) {
  return NewExecutor(model, {.num_blocks = PagesForBlocks(model, num_blocks),
                             .block_size = block_size,
                             .num_threads = threads,
                             .limits = kRoomyLimits});
}

std::shared_ptr<const engine::KeyChannelScales> TestKeyScales(const model::Model& model, kernels::KvCacheDtype kv) {
  if (!kernels::KvScalesKeyChannels(kv)) return nullptr;
  const model::ModelConfig& c = model.config();
  auto s = std::make_shared<engine::KeyChannelScales>(
      engine::KeyChannelScales{.num_layers = c.num_layers, .num_kv_heads = c.num_kv_heads, .head_dim = c.head_dim});
  for (int64_t i = 0; i < c.num_layers * c.num_kv_heads * c.head_dim; ++i) {
    s->exponents.push_back(static_cast<uint8_t>((i * 5 + i / c.head_dim) % 4));
  }
  return s;
}

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

tools::TinyModelOptions TensorParallelShape(tools::TinyModelOptions base, int32_t degree) {
  if (degree <= 1) return base;
  const int64_t block = std::max<int64_t>(32, Traits(base.dtype).block_elems);
  const int64_t group = base.num_heads / base.num_kv_heads;
  const int64_t kv_heads = (std::max<int64_t>(base.num_kv_heads, degree) + degree - 1) / degree * degree;
  int64_t head_dim = base.hidden_size / base.num_heads;
  // A rank's attention output columns, and the hidden size, in whole blocks.
  while ((kv_heads / degree * group * head_dim) % block != 0 || (kv_heads * group * head_dim) % block != 0) {
    head_dim *= 2;
  }
  base.num_kv_heads = kv_heads;
  base.num_heads = kv_heads * group;
  base.hidden_size = base.num_heads * head_dim;
  base.ffn_size = (base.ffn_size + block * degree - 1) / (block * degree) * (block * degree);
  return base;
}

int32_t TensorParallelFromEnvironment() {
  const char* env = std::getenv("KVFLEET_TEST_TENSOR_PARALLEL");
  return env != nullptr && std::atoi(env) > 1 ? std::atoi(env) : 2;
}

tools::TinyModelOptions ShapeFromEnvironment(const tools::TinyModelOptions& base, bool smollm2_by_default) {
  const char* env = std::getenv("KVFLEET_TEST_SHAPE");
  const std::string choice = env != nullptr ? env : "";
  const bool smollm2 = choice == "smollm2" || (choice != "tiny" && smollm2_by_default);
  return smollm2 ? SmolLm2Shape(base) : base;
}

}  // namespace kvfleet::testing
