#include "tools/kvfleet/local_model.h"

#include <algorithm>

#include "common/status_macros.h"

namespace kvfleet::tools {

absl::StatusOr<LocalModel> LoadLocalModel(const std::string& path, int threads, int64_t max_sequence_tokens) {
  LocalModel m;
  ASSIGN_OR_RETURN(m.model, model::LlamaModel::Load(path));
  const int64_t tokens = std::clamp<int64_t>(max_sequence_tokens, 1, m.model->hparams().context_length);
  engine::CpuExecutorOptions options;
  options.block_size = 16;
  options.num_blocks = (tokens + options.block_size - 1) / options.block_size;
  options.num_threads = threads;
  ASSIGN_OR_RETURN(m.executor, engine::CpuExecutor::Create(*m.model, options));
  return m;
}

}  // namespace kvfleet::tools
