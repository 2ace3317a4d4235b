// kvfleet dump-hidden: the features draft heads train on. Each prompt is
// answered greedily by the model itself, then the prompt and answer run
// through one forward pass, and the hidden state the output head reads at
// every answer position is written with the token that followed it.
// tools/heads/ trains on the result.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/cache_dir.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "common/write_file.h"
#include "engine/engine.h"
#include "engine/executor/executor_factory.h"
#include "kernels/cpu/quantize.h"
#include "model/hf/safetensors_file.h"
#include "model/model_fingerprint.h"
#include "model/tokenizer/chat_encoding.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tools/kvfleet/commands.h"
#include "tools/kvfleet/local_model.h"

namespace kvfleet::tools {
namespace {

constexpr char kUsage[] = R"(usage: kvfleet dump-hidden --model PATH --prompts FILE --out DIR [--max-tokens 128]
                           [--limit N] [--threads N] [--device auto] [--cpu-activations f32|q8]

Answers each prompt of FILE (one user message per line; "\n" in a line is a
newline) greedily with the model, through its chat template when it has one,
and writes what draft heads train on into DIR:
  features.safetensors  hidden [N, H] float16: the output head's input at each answer position;
                        next_token [N] and sequence [N] (float32, exact): the token that followed
                        and which answer the row belongs to
  lm_head.safetensors   weight [V, H] float16: the model's output head, dequantized
  meta.json             the model's fingerprint, sizes, counts and the time taken
tools/heads/README.md trains heads from DIR.
)";

std::vector<uint8_t> Bytes(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  return std::vector<uint8_t>(p, p + size);
}

std::vector<uint8_t> ToF16(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * 2);
  kernels::QuantizeRow(DType::kF16, values.data(), out.data(), static_cast<int64_t>(values.size()));
  return out;
}

}  // namespace

absl::Status RunDumpHidden(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(
      Flags flags,
      Flags::Parse(args, {"model", "prompts", "out", "max-tokens", "limit", "threads", "device", "cpu-activations"},
                   {}));
  ASSIGN_OR_RETURN(std::string path, flags.GetString("model"));
  ASSIGN_OR_RETURN(std::string prompts_path, flags.GetString("prompts"));
  ASSIGN_OR_RETURN(std::string out_dir, flags.GetString("out"));
  ASSIGN_OR_RETURN(int64_t max_tokens, flags.GetInt("max-tokens", 128));
  ASSIGN_OR_RETURN(int64_t limit, flags.GetInt("limit", 0));
  ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0));
  if (max_tokens < 2) return absl::InvalidArgumentError("--max-tokens must be at least 2");
  ASSIGN_OR_RETURN(engine::Device device, engine::ResolveDevice(flags.GetString("device", "auto")));
  ASSIGN_OR_RETURN(engine::CpuActivations activations,
                   engine::ParseCpuActivations(flags.GetString("cpu-activations", "f32")));

  std::ifstream in(prompts_path);
  if (!in) return absl::NotFoundError(absl::StrCat("--prompts ", prompts_path, ": cannot read it"));
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    prompts.push_back(absl::StrReplaceAll(line, {{"\\n", "\n"}}));
    if (limit > 0 && static_cast<int64_t>(prompts.size()) >= limit) break;
  }
  if (prompts.empty()) return absl::InvalidArgumentError(absl::StrCat("--prompts ", prompts_path, " has no prompt"));
  std::filesystem::create_directories(out_dir);

  const auto start = std::chrono::steady_clock::now();
  LocalModel m;
  ASSIGN_OR_RETURN(m.model, model::Model::Load(path));
  ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tok, model::CreateTokenizer(m.model->vocabulary()));
  const model::Vocabulary& vocab = m.model->vocabulary();
  absl::StatusOr<model::ChatTemplate> chat = model::ChatTemplate::FromVocabulary(vocab);
  const int64_t context = std::min<int64_t>(m.model->config().context_length, 4096);
  // One sequence at a time, and a logits row for every token of it.
  engine::ExecutorLimits limits = engine::EngineOptions::ExecutorLimitsFor(
      {.max_num_batched_tokens = static_cast<int32_t>(context), .max_num_seqs = 1}, 0);
  limits.max_logits_rows = static_cast<int32_t>(context);
  ASSIGN_OR_RETURN(m.executor, engine::CreateExecutor(*m.model, {.device = device,
                                                                 .num_blocks = (context + 15) / 16,
                                                                 .block_size = 16,
                                                                 .num_threads = static_cast<int>(threads),
                                                                 .cpu_activations = activations,
                                                                 .free_window_blocks = false,
                                                                 .limits = limits}));
  const int64_t hidden_size = m.model->config().hidden_size;
  const std::span<const model::TokenId> stops = tok->StopTokens();

  std::vector<float> hidden, next_token, sequence;
  int64_t answered = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    std::vector<model::TokenId> ids;
    if (chat.ok()) {
      const model::ChatMessage message{.role = "user", .content = prompts[p]};
      ASSIGN_OR_RETURN(ids,
                       model::EncodeChat(*tok, *chat, vocab.add_bos, {&message, 1}, /*add_generation_prompt=*/true));
    } else {
      ASSIGN_OR_RETURN(ids, tok->Encode(prompts[p], {.add_special = true, .parse_special = false}));
    }
    if (static_cast<int64_t>(ids.size()) + max_tokens > context) continue;  // too long for the dump's cache
    engine::EngineRequest request{.id = RequestId(p + 1), .prompt = ids};
    request.sampling.temperature = 0.0f;
    request.stopping.max_tokens = static_cast<int32_t>(max_tokens);
    ASSIGN_OR_RETURN(OneRequestResult answer,
                     RunOneRequest(m, std::move(request), std::vector<model::TokenId>(stops.begin(), stops.end()),
                                   [](model::TokenId) { return absl::OkStatus(); }));
    if (answer.tokens.size() < 2) continue;
    // One pass over the prompt and the answer but its last token: the row
    // of position i is the state that produced token i + 1.
    std::vector<model::TokenId> text = ids;
    text.insert(text.end(), answer.tokens.begin(), answer.tokens.end() - 1);
    std::vector<BlockId> table;
    for (int64_t b = 0; b < m.executor->info().num_blocks; ++b) table.emplace_back(static_cast<int32_t>(b));
    engine::ForwardBatchBuilder batch = engine::BatchBuilderFor(m.executor->info());
    batch.AddChunk(text, /*start_position=*/0, table, engine::LogitsWanted::kAll);
    ASSIGN_OR_RETURN(engine::ForwardOutput out, m.executor->Forward(batch.Finish()));
    if (out.hidden == nullptr) return absl::UnimplementedError("this executor does not export hidden states");
    for (size_t j = 0; j < answer.tokens.size(); ++j) {
      const int64_t row = static_cast<int64_t>(ids.size()) - 1 + static_cast<int64_t>(j);
      const std::span<const float> h = out.HiddenRow(row);
      hidden.insert(hidden.end(), h.begin(), h.end());
      next_token.push_back(static_cast<float>(answer.tokens[j]));
      sequence.push_back(static_cast<float>(answered));
    }
    ++answered;
    std::fprintf(stderr, "\rdump-hidden: %zu of %zu prompts, %zu rows", p + 1, prompts.size(), next_token.size());
  }
  std::fprintf(stderr, "\n");
  if (answered == 0)
    return absl::InvalidArgumentError(
        "no prompt was answered with 2 tokens or more (or all were too long for the context)");
  const auto rows = static_cast<int64_t>(next_token.size());
  const std::filesystem::path dir(out_dir);
  RETURN_IF_ERROR(
      WriteFile(dir / "features.safetensors",
                model::SerializeSafetensors({
                    {.name = "hidden", .dtype = DType::kF16, .shape = {rows, hidden_size}, .data = ToF16(hidden)},
                    {.name = "next_token",
                     .dtype = DType::kF32,
                     .shape = {rows},
                     .data = Bytes(next_token.data(), next_token.size() * sizeof(float))},
                    {.name = "sequence",
                     .dtype = DType::kF32,
                     .shape = {rows},
                     .data = Bytes(sequence.data(), sequence.size() * sizeof(float))},
                })));
  const model::WeightView& head = m.model->weights().output;
  std::vector<float> head_f32(static_cast<size_t>(head.rows * head.cols));
  for (int64_t r = 0; r < head.rows; ++r) {
    kernels::DequantizeRow(head.dtype, static_cast<const uint8_t*>(head.data) + r * RowBytes(head.dtype, head.cols),
                           head_f32.data() + r * head.cols, head.cols);
  }
  RETURN_IF_ERROR(WriteFile(
      dir / "lm_head.safetensors",
      model::SerializeSafetensors(
          {{.name = "weight", .dtype = DType::kF16, .shape = {head.rows, head.cols}, .data = ToF16(head_f32)}})));
  nlohmann::ordered_json meta;
  meta["model"] = path;
  // Cached: the worker that loads heads trained on these features reads it back.
  meta["target_fingerprint"] = model::CachedModelFingerprint(*m.model, DefaultCacheDir());
  meta["hidden_size"] = hidden_size;
  meta["vocab_size"] = head.rows;
  meta["prompts"] = answered;
  meta["rows"] = rows;
  meta["max_tokens"] = max_tokens;
  meta["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RETURN_IF_ERROR(WriteFile(dir / "meta.json", meta.dump(2) + "\n"));
  std::printf("dump-hidden: %lld answers, %lld rows of %lld values in %s (%.0f s)\n", static_cast<long long>(answered),
              static_cast<long long>(rows), static_cast<long long>(hidden_size), out_dir.c_str(),
              meta["seconds"].get<double>());
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
