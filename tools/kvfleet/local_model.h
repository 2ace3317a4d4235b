// A model and a CPU executor sized for one sequence, as the CLI commands
// use them.
//
//   ASSIGN_OR_RETURN(LocalModel m, LoadLocalModel(path, /*threads=*/2, /*max_sequence_tokens=*/1024));
//   SimpleGenerator gen(*m.executor);
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/llama_model.h"
#include "services/worker/engine/executor/cpu_executor.h"

namespace kvfleet::tools {

struct LocalModel {
  std::unique_ptr<model::LlamaModel> model;
  std::unique_ptr<engine::CpuExecutor> executor;
};

// max_sequence_tokens is capped at the model's context length; the KV cache
// holds exactly that many tokens.
absl::StatusOr<LocalModel> LoadLocalModel(const std::string& path, int threads, int64_t max_sequence_tokens);

}  // namespace kvfleet::tools
