// A model, an executor sized for one sequence, and one request run through
// the continuous-batching engine, as the CLI commands use them.
//
//   ASSIGN_OR_RETURN(Device d, ResolveDevice("auto"));
//   ASSIGN_OR_RETURN(LocalModel m, LoadLocalModel(path, d, /*threads=*/2, /*max_sequence_tokens=*/1024));
//   ASSIGN_OR_RETURN(OneRequestResult r, RunOneRequest(m, request, stops, on_token));
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flags/flags.h"
#include "engine/executor/model_executor.h"
#include "engine/request/request.h"
#include "model/lora/lora_adapter.h"
#include "model/model.h"

namespace kvfleet::tools {

struct LocalModel {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<engine::ModelExecutor> executor;
};

// An executor on `device` over `model` (which must outlive it) whose KV cache
// holds max_sequence_tokens, capped at the model's context length, in whole
// blocks, and which prefills such a sequence in one step.
absl::StatusOr<std::unique_ptr<engine::ModelExecutor>> CreateLocalExecutor(
    const model::Model& model, const engine::Device& device, int threads, int64_t max_sequence_tokens,
    engine::CpuActivations activations = engine::CpuActivations::kF32,
    kernels::KvCacheDtype kv_cache_dtype = kernels::KvCacheDtype::kF16,
    std::shared_ptr<const engine::KeyChannelScales> key_channel_scales = nullptr,  // KeyScalesForModes
    int32_t tensor_parallel = 1, engine::LoraLimits lora = {});

// Loads the model and creates its executor.
absl::StatusOr<LocalModel> LoadLocalModel(const std::string& path, const engine::Device& device, int threads,
                                          int64_t max_sequence_tokens,
                                          engine::CpuActivations activations = engine::CpuActivations::kF32,
                                          kernels::KvCacheDtype kv_cache_dtype = kernels::KvCacheDtype::kF16);

// --lora DIR of the local commands (generate, logits, eval): the PEFT
// adapter in DIR, named after the directory, read against `model`; null
// without the flag. And the executor's slots for it: one at its rank (none
// without one).
absl::StatusOr<std::shared_ptr<const model::LoraAdapter>> ReadLocalLora(const flags::Flags& flags,
                                                                        const model::Model& model);
engine::LoraLimits LocalLoraLimits(const model::LoraAdapter* lora);

struct OneRequestResult {
  std::vector<model::TokenId> tokens;
  engine::FinishReason finish_reason = engine::FinishReason::kLength;
  engine::Usage usage;
  double prefill_seconds = 0;  // submission to first token
  double decode_seconds = 0;   // first token to last
};

// Runs one request (no longer than the executor's sequence) to completion on
// this thread. on_token sees every token as soon as it is sampled; an error
// from it cancels the request.
absl::StatusOr<OneRequestResult> RunOneRequest(LocalModel& m, engine::EngineRequest request,
                                               const std::vector<model::TokenId>& end_of_turn_tokens,
                                               const std::function<absl::Status(model::TokenId)>& on_token);

}  // namespace kvfleet::tools
