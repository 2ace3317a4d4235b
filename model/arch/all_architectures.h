// Every architecture kvfleet runs, listed once: the registry (by GGUF and
// Hugging Face name, architecture_registry.h) and the forward dispatch
// (forward.h) are both built from this list. Adding an architecture is a
// folder beside these (model/arch/README.md) and its name here.
#pragma once

#include "model/arch/gemma3/gemma3.h"
#include "model/arch/llama/llama.h"
#include "model/arch/olmo2/olmo2.h"
#include "model/arch/phi3/phi3.h"
#include "model/arch/qwen2/qwen2.h"
#include "model/arch/qwen3/qwen3.h"

namespace kvfleet::model {

template <class... A>
struct ArchitectureList {};

using AllArchitectures = ArchitectureList<Llama, Qwen2, Qwen3, Gemma3, Phi3, Olmo2>;

}  // namespace kvfleet::model
