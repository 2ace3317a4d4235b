// The forward pass of a model's architecture over a backend's ops, chosen
// once (when an executor is made) from all_architectures.h's list: each
// architecture's Forward, instantiated for the backend's Ops type.
//
//   ForwardFn<CpuOps> forward = ForwardFor<CpuOps>(config.architecture);
//   forward(ops, config, weights, step, activations);
#pragma once

#include <string_view>

#include "model/arch/activations.h"
#include "model/arch/all_architectures.h"
#include "model/arch/decoder_weights.h"
#include "model/arch/model_config.h"
#include "model/arch/op_set.h"

namespace kvfleet::model {

template <OpSet Ops>
using ForwardFn = void (*)(Ops&, const ModelConfig&, const DecoderWeights&, const ForwardStep&, const Activations&);

namespace internal {
template <OpSet Ops, class... A>
ForwardFn<Ops> FindForward(std::string_view name, ArchitectureList<A...>) {
  ForwardFn<Ops> found = nullptr;
  ((name == A::kName ? (found = &A::template Forward<Ops>, true) : false) || ...);
  return found;
}
}  // namespace internal

// Null for a name outside the registry (a ModelConfig from ReadModelConfig always has one).
template <OpSet Ops>
ForwardFn<Ops> ForwardFor(std::string_view architecture) {
  return internal::FindForward<Ops>(architecture, AllArchitectures{});
}

}  // namespace kvfleet::model
