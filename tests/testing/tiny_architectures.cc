#include "tests/testing/tiny_architectures.h"

#include "model/arch/architecture_registry.h"

namespace kvfleet::testing {
namespace {

// The fewest layers (from base's) at which `arch` has windowed and global
// layers both, or base's when it never mixes them (none windowed, or all).
int64_t LayersForBothKinds(const model::Architecture& arch, const tools::TinyModelOptions& base) {
  tools::TinyModelOptions o = base;
  for (int64_t layers = base.num_layers; layers <= 8; ++layers) {
    o.num_layers = layers;
    const absl::StatusOr<model::ModelConfig> config = arch.default_config(o.Shape());
    if (!config.ok()) break;
    const int64_t windowed = config->windowed_layers();
    if (windowed > 0 && windowed < layers) return layers;
  }
  return base.num_layers;
}

}  // namespace

std::vector<TinyArchitecture> TinyArchitectures(const tools::TinyModelOptions& base) {
  std::vector<TinyArchitecture> out;
  for (const model::Architecture& arch : model::Architectures()) {
    tools::TinyModelOptions o = base;
    o.architecture = std::string(arch.name);
    o.seed = base.seed + out.size();
    o.num_layers = LayersForBothKinds(arch, o);
    o.llama3_rope = arch.name == "llama";
    out.push_back({o.llama3_rope ? "llama3" : o.architecture, o});
  }
  return out;
}

}  // namespace kvfleet::testing
