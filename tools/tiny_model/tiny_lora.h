// Random LoRA adapters for a model, for tests and benchmarks: pairs of
// values uniform in ±magnitude on the chosen projections of every layer,
// shaped for the model's weights (or a tensor-parallel rank's). Large
// enough by default to change a tiny model's greedy tokens.
//
//   model::LoraAdapter a = tools::RandomLoraAdapter(*model, {.name = "sql", .rank = 8, .seed = 3});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/lora/lora_adapter.h"
#include "model/model.h"

namespace kvfleet::tools {

struct RandomLoraOptions {
  std::string name = "random";
  int32_t rank = 4;
  uint32_t seed = 1;
  float magnitude = 0.3f;
  double alpha = 8.0;
  std::vector<model::Projection> targets = {model::Projection::kAttnQ,   model::Projection::kAttnK,
                                            model::Projection::kAttnV,   model::Projection::kAttnOutput,
                                            model::Projection::kFfnGate, model::Projection::kFfnUp,
                                            model::Projection::kFfnDown};
};

// Its digest is SHA-256 of its values (what the files would hash to differs;
// tests that need the files' own digest write and read them back).
model::LoraAdapter RandomLoraAdapter(const model::Model& model, const RandomLoraOptions& options);

}  // namespace kvfleet::tools
