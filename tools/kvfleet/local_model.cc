#include "tools/kvfleet/local_model.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "common/cache_dir.h"
#include "common/status_macros.h"
#include "engine/calibration/mode_choice.h"
#include "engine/engine.h"
#include "engine/executor/executor_factory.h"
#include "kernels/common/lora_segment.h"
#include "model/lora/peft_adapter_reader.h"

namespace kvfleet::tools {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Forwards tokens to the caller and remembers when they came.
class TimingSink : public engine::OutputSink {
 public:
  explicit TimingSink(const std::function<absl::Status(model::TokenId)>& on_token) : on_token_(on_token) {}

  void OnOutput(engine::RequestOutput out) override {
    for (model::TokenId t : out.new_tokens) {
      if (result.tokens.empty()) first_token = Clock::now();
      result.tokens.push_back(t);
      if (status.ok()) status = on_token_(t);
    }
    if (out.finished) {
      finished = true;
      last_token = Clock::now();
      result.finish_reason = out.finish_reason;
      result.usage = out.usage;
    }
  }

  OneRequestResult result;
  absl::Status status;
  bool finished = false;
  Clock::time_point first_token, last_token;

 private:
  const std::function<absl::Status(model::TokenId)>& on_token_;
};

// The one engine configuration RunOneRequest uses for a sequence of `tokens`.
engine::SchedulerConfig OneSequenceScheduler(int64_t tokens) {
  return {.max_num_batched_tokens = static_cast<int32_t>(std::max<int64_t>(512, tokens)), .max_num_seqs = 1};
}

}  // namespace

absl::StatusOr<std::unique_ptr<engine::ModelExecutor>> CreateLocalExecutor(
    const model::Model& model, const engine::Device& device, int threads, int64_t max_sequence_tokens,
    engine::CpuActivations activations, kernels::KvCacheDtype kv_cache_dtype,
    std::shared_ptr<const engine::KeyChannelScales> key_channel_scales, int32_t tensor_parallel,
    engine::LoraLimits lora) {
  const int64_t tokens = std::clamp<int64_t>(max_sequence_tokens, 1, model.config().context_length);
  const int64_t block_size = 16;
  return engine::CreateExecutor(model,
                                {.device = device,
                                 .num_blocks = (tokens + block_size - 1) / block_size,
                                 .block_size = block_size,
                                 .num_threads = threads,
                                 .cpu_activations = activations,
                                 .kv_cache_dtype = kv_cache_dtype,
                                 .key_channel_scales = std::move(key_channel_scales),
                                 // One sequence in blocks of every layer: callers (kvfleet
                                 // logits) lay its block table out themselves.
                                 .free_window_blocks = false,
                                 .tensor_parallel = tensor_parallel,
                                 .lora = lora,
                                 .limits = engine::EngineOptions::ExecutorLimitsFor(OneSequenceScheduler(tokens), 0)});
}

absl::StatusOr<LocalModel> LoadLocalModel(const std::string& path, const engine::Device& device, int threads,
                                          int64_t max_sequence_tokens, engine::CpuActivations activations,
                                          kernels::KvCacheDtype kv_cache_dtype) {
  LocalModel m;
  ASSIGN_OR_RETURN(m.model, model::Model::Load(path));
  ASSIGN_OR_RETURN(std::shared_ptr<const engine::KeyChannelScales> scales,
                   engine::KeyScalesForModes(*m.model, engine::CalibrationPathFor(path), false, device.kind,
                                             activations, kv_cache_dtype));
  ASSIGN_OR_RETURN(m.executor, CreateLocalExecutor(*m.model, device, threads, max_sequence_tokens, activations,
                                                   kv_cache_dtype, std::move(scales)));
  return m;
}

absl::StatusOr<std::shared_ptr<const model::LoraAdapter>> ReadLocalLora(const flags::Flags& flags,
                                                                        const model::Model& model) {
  if (!flags.Has("lora")) return nullptr;
  const std::string dir = flags.GetString("lora", "");
  ASSIGN_OR_RETURN(model::LoraAdapter adapter,
                   model::ReadPeftAdapter(dir, std::filesystem::path(dir).filename().string(), model,
                                          {.max_rank = kernels::kMaxLoraRank}));
  return std::make_shared<const model::LoraAdapter>(std::move(adapter));
}

engine::LoraLimits LocalLoraLimits(const model::LoraAdapter* lora) {
  return lora != nullptr ? engine::LoraLimits{.max_loras = 1, .max_rank = lora->rank} : engine::LoraLimits{};
}

absl::StatusOr<OneRequestResult> RunOneRequest(LocalModel& m, engine::EngineRequest request,
                                               const std::vector<model::TokenId>& end_of_turn_tokens,
                                               const std::function<absl::Status(model::TokenId)>& on_token) {
  engine::Engine engine(*m.executor, {.model_id = m.model->config().name,
                                      .scheduler = OneSequenceScheduler(m.executor->info().limits.max_batch_tokens),
                                      .end_of_turn_tokens = end_of_turn_tokens});
  TimingSink sink(on_token);
  const RequestId id = request.id;
  const Clock::time_point start = Clock::now();
  RETURN_IF_ERROR(engine.Submit(std::move(request), &sink));
  while (engine.HasWork()) {
    RETURN_IF_ERROR(engine.Step());
    if (!sink.status.ok() && !sink.finished) engine.Cancel(id);
  }
  RETURN_IF_ERROR(sink.status);
  sink.result.prefill_seconds = Seconds(start, sink.first_token);
  sink.result.decode_seconds = Seconds(sink.first_token, sink.last_token);
  return std::move(sink.result);
}

}  // namespace kvfleet::tools
