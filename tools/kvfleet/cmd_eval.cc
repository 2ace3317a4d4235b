// kvfleet eval: teacher-forced perplexity of a text, and the divergence of
// this mode's distributions from a saved reference (tools/eval/).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/cache_dir.h"
#include "common/flags/flags.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "engine/calibration/calibration_record.h"
#include "engine/calibration/key_channel_maxima.h"
#include "engine/calibration/mode_choice.h"
#include "engine/executor/executor_factory.h"
#include "model/model_fingerprint.h"
#include "model/tokenizer/tokenizer.h"
#include "tools/eval/distribution_stats.h"
#include "tools/eval/eval_windows.h"
#include "tools/eval/reference_file.h"
#include "tools/kvfleet/commands.h"
#include "tools/kvfleet/local_model.h"

namespace kvfleet::tools {
namespace {

constexpr char kUsage[] =
    R"(usage: kvfleet eval --model PATH (--text FILE | --tokens FILE) [--ctx 512] [--max-windows N]
                    [--save-reference FILE] [--reference FILE]
                    [--threads N] [--device auto] [--cpu-activations f32|q8] [--kv-cache-dtype f16|...]
                    [--calibration RECORD] [--tensor-parallel N] [--lora DIR]
       kvfleet eval --model PATH (--text FILE | --tokens FILE) --reference FILE --calibrate OUT
                    --activations-gate KL --kv-gate KL [--gate-source TEXT] [--reference-source TEXT]
                    [--lora DIR [--calibration RECORD]]

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
of the text's next token. --kv-cache-dtype int8_rotated_scaled takes its
key channel scales from the model's calibration record (--calibration, or
the one beside the model). --tensor-parallel N runs the model split across
N ranks (on the CPU, in turn): against a reference saved at 1, the KL
divergence is what the split's sums in another order cost. --lora DIR
runs every window under the LoRA adapter in DIR (PEFT's format): a mode
under an adapter is judged against a reference saved under it.

--calibrate runs every CPU mode (float32 and 8-bit activations, each KV
format) against --reference, which should be float64 distributions, and
writes the model's calibration record to OUT (put it beside the model as
PATH.calibration.json for workers to find). A mode passes when its mean KL
divergence is at most --activations-gate (modes with a float16 KV cache)
or --kv-gate (8-bit KV): llama.cpp's own divergences from the same
reference, for its default path and its q8_0 KV cache
(bench/eval_vs_llamacpp.py measures both). The exact mode runs first and
measures, from its float16 cache, the key channel scales that
int8_rotated_scaled uses (engine/calibration/key_channel_maxima.h); the
record keeps them. Workers with
--cpu-activations auto and --kv-cache-dtype auto (their defaults) run the
fastest passing mode.

--calibrate with --lora DIR judges every mode under the adapter, against
a float64 reference that merges it into the weights
(tests/reference/lora_numpy.py), by the same gate, and says whether the
mode a worker takes from the base's record (--calibration, or the one
beside the model) passes under it; int8_rotated_scaled keeps that
record's key scales, as a worker does. The record names the adapter, and
workers never choose their mode from it.
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

// What every mode of one evaluation shares.
struct EvalInput {
  const model::Model& model;
  std::vector<model::TokenId> tokens;
  std::vector<EvalWindow> windows;
  int64_t ctx = 0;
  engine::Device device;
  int threads = 0;
  int32_t tensor_parallel = 1;
  std::string reference_path;  // empty: no divergence measured
  // --lora: every window runs under this adapter (null: the base model).
  std::shared_ptr<const model::LoraAdapter> lora;
  std::string model_path;  // where its calibration record sits by default
};

struct ModeResult {
  std::string numerics;
  PerplexityStats ppl;
  std::optional<DivergenceSummary> divergence;
  double tokens_per_second = 0;
};

// Reads the keys of a window back from a float16 cache into `maxima`.
absl::Status AddWindowKeys(engine::ModelExecutor& executor, const model::ModelConfig& c, int64_t block_size,
                           int64_t length, engine::KeyChannelMaxima& maxima) {
  const kernels::KvCacheLayout one{
      .num_blocks = 1, .num_kv_heads = c.num_kv_heads, .block_size = block_size, .head_dim = c.head_dim};
  std::vector<uint8_t> page(static_cast<size_t>(executor.info().kv_block_bytes));
  for (int64_t b = 0; b * block_size < length; ++b) {
    RETURN_IF_ERROR(executor.CopyKvBlockOut(BlockId(static_cast<int32_t>(b)), page));
    maxima.AddBlock(page, one, std::min(block_size, length - b * block_size));
  }
  return absl::OkStatus();
}

// One mode over every window. A sequence of a window is prefilled in
// chunks that each return every position's logits (chunked = whole, bit
// for bit). `maxima` (float16 KV only) collects the keys' channel maxima;
// `scales` are int8_rotated_scaled's.
absl::StatusOr<ModeResult> EvalMode(const EvalInput& in, engine::CpuActivations activations,
                                    kernels::KvCacheDtype kv_dtype, ReferenceWriter* save,
                                    engine::KeyChannelMaxima* maxima = nullptr,
                                    std::shared_ptr<const engine::KeyChannelScales> scales = nullptr) {
  const model::Model& m = in.model;
  const int64_t block_size = 16;
  const int32_t chunk = static_cast<int32_t>(std::min<int64_t>(in.ctx, 128));
  ASSIGN_OR_RETURN(std::unique_ptr<engine::ModelExecutor> executor,
                   engine::CreateExecutor(
                       m, {.device = in.device,
                           .num_blocks = (in.ctx + block_size - 1) / block_size,
                           .block_size = block_size,
                           .num_threads = in.threads,
                           .cpu_activations = activations,
                           .kv_cache_dtype = kv_dtype,
                           .key_channel_scales = std::move(scales),
                           .free_window_blocks = false,
                           .tensor_parallel = in.tensor_parallel,
                           .lora = LocalLoraLimits(in.lora.get()),
                           .limits = {.max_batch_tokens = chunk, .max_batch_chunks = 1, .max_logits_rows = chunk}}));
  if (in.lora) RETURN_IF_ERROR(executor->LoadLora(0, in.lora));
  std::vector<BlockId> table;
  for (int64_t b = 0; b < executor->info().num_blocks; ++b) table.emplace_back(static_cast<int32_t>(b));

  const int64_t vocab = m.config().vocab_size;
  std::optional<ReferenceReader> reference;
  if (!in.reference_path.empty()) {
    ASSIGN_OR_RETURN(reference, ReferenceReader::Open(in.reference_path, vocab));
    int64_t scored = 0;
    for (const EvalWindow& w : in.windows) scored += w.scored();
    if (reference->positions() != scored) {
      return absl::InvalidArgumentError(absl::StrCat("--reference ", in.reference_path, " holds ",
                                                     reference->positions(), " positions; this text and --ctx score ",
                                                     scored));
    }
  }
  const bool use_bos = m.vocabulary().add_bos && m.vocabulary().bos.has_value();
  const model::TokenId bos = use_bos ? *m.vocabulary().bos : 0;
  ModeResult result{.numerics = executor->info().numerics};
  DivergenceStats divergence;
  std::vector<double> ref_row;
  const auto start = std::chrono::steady_clock::now();
  for (size_t wi = 0; wi < in.windows.size(); ++wi) {
    const EvalWindow& w = in.windows[wi];
    std::vector<model::TokenId> ids(in.tokens.begin() + w.start, in.tokens.begin() + w.start + w.length);
    if (use_bos) ids[0] = bos;
    for (int64_t at = 0; at < w.length; at += chunk) {
      const int64_t n = std::min<int64_t>(chunk, w.length - at);
      engine::ForwardBatchBuilder batch = engine::BatchBuilderFor(executor->info());
      batch.AddChunk(std::span<const model::TokenId>(ids).subspan(static_cast<size_t>(at), static_cast<size_t>(n)),
                     static_cast<int32_t>(at), table, engine::LogitsWanted::kAll, {}, in.lora ? 0 : -1);
      ASSIGN_OR_RETURN(engine::ForwardOutput out, executor->Forward(batch.Finish()));
      for (int64_t r = 0; r < n; ++r) {
        const int64_t pos = at + r;
        if (pos < w.first_scored || pos + 1 >= w.length) continue;
        const model::TokenId next = ids[static_cast<size_t>(pos + 1)];
        const std::vector<double> lp =
            LogSoftmax(std::span<const float>(out.logits + r * out.vocab_size, static_cast<size_t>(vocab)));
        result.ppl.Add(-lp[static_cast<size_t>(next)]);
        if (save != nullptr) RETURN_IF_ERROR(save->Add(next, lp));
        if (reference) {
          ASSIGN_OR_RETURN(model::TokenId ref_next, reference->Next(ref_row));
          if (ref_next != next) {
            return absl::InvalidArgumentError("--reference was made on another text or --ctx (its tokens differ)");
          }
          divergence.Add(ref_row, lp, next);
        }
      }
    }
    if (maxima != nullptr) RETURN_IF_ERROR(AddWindowKeys(*executor, m.config(), block_size, w.length, *maxima));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.tokens_per_second = static_cast<double>((wi + 1) * in.ctx) / seconds;
    std::fprintf(stderr, "\r%s [%zu/%zu windows] %.1f tokens/s, perplexity %.4f", result.numerics.c_str(), wi + 1,
                 in.windows.size(), result.tokens_per_second, result.ppl.perplexity());
  }
  std::fprintf(stderr, "\n");
  if (reference) result.divergence = divergence.Summary();
  return result;
}

void PrintResult(const std::string& model_path, const EvalInput& in, const ModeResult& r) {
  std::printf("model %s, %s: %zu windows of %lld tokens, %lld positions scored, %.1f tokens/s\n", model_path.c_str(),
              r.numerics.c_str(), in.windows.size(), static_cast<long long>(in.ctx),
              static_cast<long long>(r.ppl.count()), r.tokens_per_second);
  std::printf("perplexity %.6f +/- %.6f\n", r.ppl.perplexity(), r.ppl.perplexity_stderr());
  if (r.divergence) {
    const DivergenceSummary& d = *r.divergence;
    std::printf("KL divergence from the reference: mean %.6g, median %.6g, p99 %.6g, max %.6g\n", d.mean_kl,
                d.median_kl, d.p99_kl, d.max_kl);
    std::printf("same top token %.4f%%, RMS delta p %.6g\n", 100.0 * d.same_top1, d.rms_delta_p);
  }
}

// Every CPU mode against the reference, judged by the gate, into a record.
absl::Status Calibrate(const Flags& flags, const Args& args, const EvalInput& in) {
  if (in.reference_path.empty()) {
    return absl::InvalidArgumentError("--calibrate needs --reference (float64 distributions of the same text)");
  }
  if (in.device.kind != engine::DeviceKind::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat("--calibrate measures the CPU backend's modes; this run is on ",
                                                   in.device.ToString(), " (give --device cpu)"));
  }
  if (!flags.Has("activations-gate") || !flags.Has("kv-gate")) {
    return absl::InvalidArgumentError(
        "--calibrate needs --activations-gate and --kv-gate: llama.cpp's mean KL divergence from the same reference "
        "for its default path and for its q8_0 KV cache (bench/eval_vs_llamacpp.py prints both)");
  }
  ASSIGN_OR_RETURN(std::string out, flags.GetString("calibrate"));
  engine::CalibrationRecord rec;
  ASSIGN_OR_RETURN(rec.gate.activations_mean_kl, flags.GetDouble("activations-gate", 0));
  ASSIGN_OR_RETURN(rec.gate.kv_mean_kl, flags.GetDouble("kv-gate", 0));
  if (!(rec.gate.activations_mean_kl >= 0) || !(rec.gate.kv_mean_kl >= 0)) {
    return absl::InvalidArgumentError("--activations-gate and --kv-gate must be non-negative");
  }
  rec.gate.source = flags.GetString("gate-source", "given on the command line");
  rec.reference = flags.GetString("reference-source", absl::StrCat("the reference file ", in.reference_path));
  rec.model_fingerprint = model::CachedModelFingerprint(in.model, DefaultCacheDir());
  rec.backend = "cpu";
  rec.text.name = flags.GetString("text", flags.GetString("tokens", ""));
  rec.text.sha256 = Sha256Hex(
      std::string_view(reinterpret_cast<const char*>(in.tokens.data()), in.tokens.size() * sizeof(model::TokenId)));
  rec.text.context = in.ctx;
  rec.command = absl::StrCat("kvfleet eval ", absl::StrJoin(args, " "));
  // The exact mode runs first and measures the keys that int8_rotated_scaled's
  // scales come from; the modes after it use them. Under an adapter, a
  // worker keeps its base model's scales: they are judged here when the
  // base's record has them.
  const model::ModelConfig& c = in.model.config();
  engine::KeyChannelMaxima maxima(c.num_layers, c.num_kv_heads, c.head_dim);
  std::shared_ptr<const engine::KeyChannelScales> scales;
  // The base model's record: a worker under an adapter keeps its mode and scales.
  const std::string base_record = flags.GetString("calibration", engine::CalibrationPathFor(in.model_path));
  if (in.lora) {
    rec.adapter = in.lora->identity();
    absl::StatusOr<std::shared_ptr<const engine::KeyChannelScales>> base_scales =
        engine::KeyScalesForModes(in.model, base_record, /*record_required=*/false, engine::DeviceKind::kCpu,
                                  engine::CpuActivations::kF32, kernels::KvCacheDtype::kInt8RotatedScaled);
    if (base_scales.ok() && *base_scales != nullptr) {
      scales = *base_scales;
      rec.key_channel_scales = *scales;
      rec.key_scale_rule = absl::StrCat(engine::kKeyScaleRule, " (the base model's, from ", base_record, ")");
    }
  }
  for (engine::CpuActivations a : {engine::CpuActivations::kF32, engine::CpuActivations::kQ8}) {
    for (kernels::KvCacheDtype kv :
         {kernels::KvCacheDtype::kF16, kernels::KvCacheDtype::kInt8, kernels::KvCacheDtype::kInt8Rotated,
          kernels::KvCacheDtype::kInt8RotatedScaled, kernels::KvCacheDtype::kFp8E4M3}) {
      const bool exact = a == engine::CpuActivations::kF32 && kv == kernels::KvCacheDtype::kF16;
      ASSIGN_OR_RETURN(ModeResult r, EvalMode(in, a, kv, nullptr, exact ? &maxima : nullptr, scales));
      if (exact && scales == nullptr) {
        scales = std::make_shared<const engine::KeyChannelScales>(maxima.Scales());
        rec.key_channel_scales = *scales;
        rec.key_scale_rule = engine::kKeyScaleRule;
      }
      rec.text.positions = r.ppl.count();
      // The record's identity of the mode: its scales sit beside it.
      engine::ModeFigures f{.cpu_activations = a,
                            .kv_cache_dtype = kv,
                            .numerics = engine::CpuNumerics(a, kv),
                            .perplexity = r.ppl.perplexity(),
                            .mean_kl = r.divergence->mean_kl,
                            .median_kl = r.divergence->median_kl,
                            .p99_kl = r.divergence->p99_kl,
                            .max_kl = r.divergence->max_kl,
                            .same_top1 = r.divergence->same_top1,
                            .tokens_per_second = r.tokens_per_second};
      f.passes = engine::PassesGate(f, rec.gate);
      std::printf("%-22s perplexity %.4f, mean KL %.4g, p99 %.4g, same top %.2f%%: %s\n", r.numerics.c_str(),
                  f.perplexity, f.mean_kl, f.p99_kl, 100 * f.same_top1, f.passes ? "passes" : "fails");
      rec.modes.push_back(f);
    }
  }
  RETURN_IF_ERROR(engine::WriteCalibrationRecord(out, rec));
  const engine::CalibrationMatch match{
      .model_fingerprint = rec.model_fingerprint, .backend = "cpu", .numerics_of = engine::CpuNumerics};
  if (!in.lora) {
    const engine::ChosenMode chosen = engine::ChooseMode({}, rec, out, match);
    std::printf("wrote %s; a worker's default: %s\n", out.c_str(), chosen.reason.c_str());
    return absl::OkStatus();
  }
  // A worker serving the adapter runs the mode its base's record picks:
  // does that mode hold under the adapter?
  const engine::ChosenMode chosen =
      engine::ChooseMode({}, engine::ReadCalibrationRecord(base_record), base_record, match);
  for (const engine::ModeFigures& f : rec.modes) {
    if (f.cpu_activations != chosen.activations || f.kv_cache_dtype != chosen.kv) continue;
    std::printf("wrote %s, under the adapter %s; a worker's default (%s) here: mean KL %.3g, %s the gate\n",
                out.c_str(), rec.adapter.c_str(), chosen.reason.c_str(), f.mean_kl, f.passes ? "passes" : "fails");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunEval(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args,
                                             {"model",
                                              "text",
                                              "tokens",
                                              "ctx",
                                              "max-windows",
                                              "save-reference",
                                              "reference",
                                              "threads",
                                              "device",
                                              "cpu-activations",
                                              "kv-cache-dtype",
                                              "calibrate",
                                              "activations-gate",
                                              "kv-gate",
                                              "gate-source",
                                              "reference-source",
                                              "calibration",
                                              "tensor-parallel",
                                              "tensor-parallel-size",
                                              "lora"},
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
  ASSIGN_OR_RETURN(int64_t tensor_parallel, flags.GetIntOrAlias("tensor-parallel", "tensor-parallel-size", 1));
  EvalInput in{.model = *m,
               .ctx = ctx,
               .device = device,
               .threads = static_cast<int>(threads),
               .tensor_parallel = static_cast<int32_t>(tensor_parallel),
               .model_path = path};
  ASSIGN_OR_RETURN(in.tokens, ReadTokens(flags, *m));
  in.windows = EvalWindows(static_cast<int64_t>(in.tokens.size()), ctx);
  if (in.windows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the text is ", in.tokens.size(), " tokens; a window of --ctx ", ctx,
                                                   " needs at least that many"));
  }
  if (max_windows > 0 && static_cast<int64_t>(in.windows.size()) > max_windows) in.windows.resize(max_windows);
  if (flags.Has("reference")) {
    ASSIGN_OR_RETURN(in.reference_path, flags.GetString("reference"));
  }
  ASSIGN_OR_RETURN(in.lora, ReadLocalLora(flags, *m));
  if (flags.Has("calibrate")) {
    if (flags.Has("save-reference") || flags.Has("cpu-activations") || flags.Has("kv-cache-dtype")) {
      return absl::InvalidArgumentError(
          "--calibrate runs every mode itself: drop --save-reference, --cpu-activations and --kv-cache-dtype");
    }
    return Calibrate(flags, args, in);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const engine::KeyChannelScales> scales,
                   engine::KeyScalesForModes(*m, flags.GetString("calibration", engine::CalibrationPathFor(path)),
                                             flags.Has("calibration"), device.kind, activations, kv_dtype));
  std::optional<ReferenceWriter> save;
  if (flags.Has("save-reference")) {
    ASSIGN_OR_RETURN(std::string out, flags.GetString("save-reference"));
    ASSIGN_OR_RETURN(save, ReferenceWriter::Create(out, m->config().vocab_size));
  }
  ASSIGN_OR_RETURN(ModeResult r, EvalMode(in, activations, kv_dtype, save ? &*save : nullptr, nullptr, scales));
  if (save) RETURN_IF_ERROR(save->Finish());
  PrintResult(path, in, r);
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
