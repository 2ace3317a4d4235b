// kvfleet eval: teacher-forced perplexity of a text, and the divergence of
// this mode's distributions from a saved reference (tools/eval/).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "engine/executor/executor_factory.h"
#include "model/tokenizer/tokenizer.h"
#include "tools/eval/distribution_stats.h"
#include "tools/eval/eval_windows.h"
#include "tools/eval/reference_file.h"
#include "tools/kvfleet/commands.h"

namespace kvfleet::tools {
namespace {

constexpr char kUsage[] =
    R"(usage: kvfleet eval --model PATH (--text FILE | --tokens FILE) [--ctx 512] [--max-windows N]
                    [--save-reference FILE] [--reference FILE]
                    [--threads N] [--device auto] [--cpu-activations f32|q8] [--kv-cache-dtype f16|...]

Teacher-forced evaluation, in process, of the model in the mode given.
The text (tokenized without special tokens) or the token ids (a file of
integers) is cut into windows of --ctx tokens, each run from an empty
cache with its first token replaced by BOS when the model uses one; the
second half of each window is scored (llama.cpp's perplexity rule).
Prints the perplexity with its standard error. --save-reference writes this
mode's distributions at every scored position (float16 log-probabilities);
--reference reads such a file, made on the same text and windows, and
prints the KL divergence from it (mean, median, p99, max), the share of
positions with the same top token and the RMS change in the probability
of the text's next token.
)";

absl::StatusOr<std::vector<model::TokenId>> ReadTokens(const Flags& flags, const model::Model& m) {
  if (flags.Has("tokens")) {
    ASSIGN_OR_RETURN(std::string path, flags.GetString("tokens"));
    std::ifstream in(path);
    if (!in) return absl::InvalidArgumentError(absl::StrCat("--tokens ", path, ": cannot be read"));
    std::vector<model::TokenId> ids;
    int64_t id;
    while (in >> id) {
      if (id < 0 || id >= m.config().vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("--tokens ", path, ": ", id, " is not a token of the model"));
      }
      ids.push_back(static_cast<model::TokenId>(id));
      if (in.peek() == ',') in.ignore();
    }
    if (!in.eof()) return absl::InvalidArgumentError(absl::StrCat("--tokens ", path, ": not a list of integers"));
    return ids;
  }
  ASSIGN_OR_RETURN(std::string path, flags.GetString("text"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--text ", path, ": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tok, model::CreateTokenizer(m.vocabulary()));
  return tok->Encode(text.str(), {.parse_special = false});
}

}  // namespace

absl::Status RunEval(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args,
                                             {"model", "text", "tokens", "ctx", "max-windows", "save-reference",
                                              "reference", "threads", "device", "cpu-activations", "kv-cache-dtype"},
                                             {}));
  if (flags.Has("text") == flags.Has("tokens")) return absl::InvalidArgumentError("give one of --text and --tokens");
  ASSIGN_OR_RETURN(std::string path, flags.GetString("model"));
  ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0));
  ASSIGN_OR_RETURN(int64_t ctx, flags.GetInt("ctx", 512));
  ASSIGN_OR_RETURN(int64_t max_windows, flags.GetInt("max-windows", 0));
  ASSIGN_OR_RETURN(engine::Device device, engine::ResolveDevice(flags.GetString("device", "auto")));
  ASSIGN_OR_RETURN(engine::CpuActivations activations,
                   engine::ParseCpuActivations(flags.GetString("cpu-activations", "f32")));
  ASSIGN_OR_RETURN(kernels::KvCacheDtype kv_dtype, engine::ParseKvCacheDtype(flags.GetString("kv-cache-dtype", "f16")));
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::Load(path));
  if (ctx < 4 || ctx > m->config().context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ctx ", ctx, " must be in [4, ", m->config().context_length, "] (the model's context)"));
  }
  ASSIGN_OR_RETURN(std::vector<model::TokenId> tokens, ReadTokens(flags, *m));
  std::vector<EvalWindow> windows = EvalWindows(static_cast<int64_t>(tokens.size()), ctx);
  if (windows.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the text is ", tokens.size(), " tokens; a window of --ctx ", ctx, " needs at least that many"));
  }
  if (max_windows > 0 && static_cast<int64_t>(windows.size()) > max_windows) windows.resize(max_windows);

  // One sequence of a window, prefilled in chunks that each return every
  // position's logits (chunked = whole, bit for bit).
  const int64_t block_size = 16;
  const int32_t chunk = static_cast<int32_t>(std::min<int64_t>(ctx, 128));
  ASSIGN_OR_RETURN(std::unique_ptr<engine::ModelExecutor> executor,
                   engine::CreateExecutor(
                       *m, {.device = device,
                            .num_blocks = (ctx + block_size - 1) / block_size,
                            .block_size = block_size,
                            .num_threads = static_cast<int>(threads),
                            .cpu_activations = activations,
                            .kv_cache_dtype = kv_dtype,
                            .free_window_blocks = false,
                            .limits = {.max_batch_tokens = chunk, .max_batch_chunks = 1, .max_logits_rows = chunk}}));
  std::vector<BlockId> table;
  for (int64_t b = 0; b < executor->info().num_blocks; ++b) table.emplace_back(static_cast<int32_t>(b));

  const int64_t vocab = m->config().vocab_size;
  std::optional<ReferenceWriter> save;
  if (flags.Has("save-reference")) {
    ASSIGN_OR_RETURN(std::string out, flags.GetString("save-reference"));
    ASSIGN_OR_RETURN(save, ReferenceWriter::Create(out, vocab));
  }
  std::optional<ReferenceReader> reference;
  if (flags.Has("reference")) {
    ASSIGN_OR_RETURN(std::string in, flags.GetString("reference"));
    ASSIGN_OR_RETURN(reference, ReferenceReader::Open(in, vocab));
    int64_t scored = 0;
    for (const EvalWindow& w : windows) scored += w.scored();
    if (reference->positions() != scored) {
      return absl::InvalidArgumentError(absl::StrCat("--reference ", in, " holds ", reference->positions(),
                                                     " positions; this text and --ctx score ", scored));
    }
  }
  const bool use_bos = m->vocabulary().add_bos && m->vocabulary().bos.has_value();
  const model::TokenId bos = use_bos ? *m->vocabulary().bos : 0;
  PerplexityStats ppl;
  DivergenceStats divergence;
  std::vector<double> ref_row;
  const auto start = std::chrono::steady_clock::now();
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    const EvalWindow& w = windows[wi];
    std::vector<model::TokenId> ids(tokens.begin() + w.start, tokens.begin() + w.start + w.length);
    if (use_bos) ids[0] = bos;
    for (int64_t at = 0; at < w.length; at += chunk) {
      const int64_t n = std::min<int64_t>(chunk, w.length - at);
      engine::ForwardBatchBuilder batch = engine::BatchBuilderFor(executor->info());
      batch.AddChunk(std::span<const model::TokenId>(ids).subspan(static_cast<size_t>(at), static_cast<size_t>(n)),
                     static_cast<int32_t>(at), table, engine::LogitsWanted::kAll);
      ASSIGN_OR_RETURN(engine::ForwardOutput out, executor->Forward(batch.Finish()));
      for (int64_t r = 0; r < n; ++r) {
        const int64_t pos = at + r;
        if (pos < w.first_scored || pos + 1 >= w.length) continue;
        const model::TokenId next = ids[static_cast<size_t>(pos + 1)];
        const std::vector<double> lp =
            LogSoftmax(std::span<const float>(out.logits + r * out.vocab_size, static_cast<size_t>(vocab)));
        ppl.Add(-lp[static_cast<size_t>(next)]);
        if (save) RETURN_IF_ERROR(save->Add(next, lp));
        if (reference) {
          ASSIGN_OR_RETURN(model::TokenId ref_next, reference->Next(ref_row));
          if (ref_next != next) {
            return absl::InvalidArgumentError("--reference was made on another text or --ctx (its tokens differ)");
          }
          divergence.Add(ref_row, lp, next);
        }
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\r[%zu/%zu windows] %.1f tokens/s, perplexity %.4f", wi + 1, windows.size(),
                 static_cast<double>((wi + 1) * ctx) / seconds, ppl.perplexity());
  }
  std::fprintf(stderr, "\n");
  if (save) RETURN_IF_ERROR(save->Finish());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("model %s, %s: %zu windows of %lld tokens, %lld positions scored, %.1f tokens/s\n", path.c_str(),
              executor->info().numerics.c_str(), windows.size(), static_cast<long long>(ctx),
              static_cast<long long>(ppl.count()), static_cast<double>(windows.size() * ctx) / seconds);
  std::printf("perplexity %.6f +/- %.6f\n", ppl.perplexity(), ppl.perplexity_stderr());
  if (reference) {
    const DivergenceSummary d = divergence.Summary();
    std::printf("KL divergence from the reference: mean %.6g, median %.6g, p99 %.6g, max %.6g\n", d.mean_kl,
                d.median_kl, d.p99_kl, d.max_kl);
    std::printf("same top token %.4f%%, RMS delta p %.6g\n", 100.0 * d.same_top1, d.rms_delta_p);
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
