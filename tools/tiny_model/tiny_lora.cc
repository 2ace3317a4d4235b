#include "tools/tiny_model/tiny_lora.h"

#include <random>
#include <string_view>

#include "common/sha256.h"

namespace kvfleet::tools {

model::LoraAdapter RandomLoraAdapter(const model::Model& model, const RandomLoraOptions& options) {
  model::LoraAdapter a{
      .name = options.name, .rank = options.rank, .alpha = options.alpha, .scale = options.alpha / options.rank};
  std::mt19937 rng(options.seed);
  std::uniform_real_distribution<float> value(-options.magnitude, options.magnitude);
  std::string bytes;
  const auto fill = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = value(rng);
    bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    return v;
  };
  for (const model::LayerWeights& l : model.weights().layers) {
    auto& layer = a.layers.emplace_back();
    const auto matrices = l.Matrices();
    for (model::Projection p : options.targets) {
      const model::WeightView& w = *matrices[static_cast<size_t>(p)];
      layer[static_cast<size_t>(p)] = model::LoraPair{
          .in = w.cols, .out = w.rows, .a = fill(options.rank * w.cols), .b = fill(w.rows * options.rank)};
    }
  }
  a.digest = Sha256Hex(bytes);
  return a;
}

}  // namespace kvfleet::tools
