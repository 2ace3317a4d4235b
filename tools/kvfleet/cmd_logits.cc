// kvfleet logits: the next-token logits after a prompt, for reference tests.
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "engine/executor/executor_factory.h"
#include "tools/kvfleet/commands.h"
#include "tools/kvfleet/local_model.h"

namespace kvfleet::tools {

namespace {
constexpr char kUsage[] =
    R"(usage: kvfleet logits --model PATH --prompt-token-ids 1,2,3 --out FILE [--threads N] [--device auto]
                      [--cpu-activations f32|q8] [--lora DIR]

Writes the logits of the token that would follow the prompt to FILE as raw
little-endian float32 (one value per vocabulary entry). --lora DIR: under
the LoRA adapter in DIR (PEFT's format).
)";
}  // namespace

absl::Status RunLogits(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(
      Flags flags,
      Flags::Parse(args, {"model", "prompt-token-ids", "out", "threads", "device", "cpu-activations", "lora"}, {}));
  ASSIGN_OR_RETURN(std::string path, flags.GetString("model"));
  ASSIGN_OR_RETURN(std::string out_path, flags.GetString("out"));
  ASSIGN_OR_RETURN(std::vector<model::TokenId> prompt, flags.GetTokenIds("prompt-token-ids"));
  ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0));
  if (prompt.empty()) return absl::InvalidArgumentError("--prompt-token-ids is required and must not be empty");
  ASSIGN_OR_RETURN(engine::Device device, engine::ResolveDevice(flags.GetString("device", "auto")));
  ASSIGN_OR_RETURN(engine::CpuActivations activations,
                   engine::ParseCpuActivations(flags.GetString("cpu-activations", "f32")));
  LocalModel m;
  ASSIGN_OR_RETURN(m.model, model::Model::Load(path));
  ASSIGN_OR_RETURN(const std::shared_ptr<const model::LoraAdapter> lora, ReadLocalLora(flags, *m.model));
  ASSIGN_OR_RETURN(m.executor, CreateLocalExecutor(
                                   *m.model, device, static_cast<int>(threads), static_cast<int64_t>(prompt.size()),
                                   activations, kernels::KvCacheDtype::kF16, nullptr, 1, LocalLoraLimits(lora.get())));
  if (lora) RETURN_IF_ERROR(m.executor->LoadLora(0, lora));

  std::vector<BlockId> table;
  for (int64_t b = 0; b < m.executor->info().num_blocks; ++b) table.emplace_back(static_cast<int32_t>(b));
  engine::ForwardBatchBuilder batch = engine::BatchBuilderFor(m.executor->info());
  batch.AddChunk(prompt, /*start_position=*/0, table, engine::LogitsWanted::kLast, {}, lora ? 0 : -1);
  ASSIGN_OR_RETURN(engine::ForwardOutput out, m.executor->Forward(batch.Finish()));

  std::ofstream f(out_path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(out.logits),
          static_cast<std::streamsize>(out.num_rows * out.vocab_size * static_cast<int64_t>(sizeof(float))));
  if (!f) return absl::InternalError(absl::StrCat(out_path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
