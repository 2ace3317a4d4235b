// engine_bench lora-decode: the cost of serving many LoRA adapters in one
// batch. N greedy streams spread over A random adapters and the base model
// (stream i under adapter i mod (A + 1), the last share the base's) against
// N streams of the base model alone, alternated within each repeat so a
// noisy machine slows both alike; the ratio of their aggregate decode
// rates is the figure. Before that, each adapter's files are written, read
// back (disk to host: parse and check against the base), put into a device
// slot and taken out, and those times printed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/engine_bench.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "model/lora/peft_adapter_reader.h"
#include "model/lora/peft_adapter_writer.h"
#include "tools/tiny_model/tiny_lora.h"

namespace kvfleet::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t BlocksFor(int64_t tokens) { return (tokens + 15) / 16; }

absl::StatusOr<std::vector<model::Projection>> ParseTargets(const std::string& text) {
  std::vector<model::Projection> out;
  for (absl::string_view module : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    bool known = false;
    for (int t = 0; t < model::kProjections; ++t) {
      if (model::LoraTargetModule(static_cast<model::Projection>(t)) ==
          std::string_view(module.data(), module.size())) {
        out.push_back(static_cast<model::Projection>(t));
        known = true;
      }
    }
    if (!known) return absl::InvalidArgumentError(absl::StrCat("--targets: unknown module ", std::string(module)));
  }
  return out;
}

}  // namespace

absl::Status RunLoraDecode(const Flags& flags) {
  const std::string path = flags.GetString("model", DefaultModelPath());
  ASSIGN_OR_RETURN(const int64_t threads, flags.GetInt("threads", 2));
  ASSIGN_OR_RETURN(const int64_t streams, flags.GetInt("streams", 16));
  ASSIGN_OR_RETURN(const int64_t adapters, flags.GetInt("adapters", 8));
  ASSIGN_OR_RETURN(const int64_t rank, flags.GetInt("rank", 8));
  ASSIGN_OR_RETURN(const std::vector<model::Projection> targets,
                   ParseTargets(flags.GetString("targets", "q_proj,k_proj,v_proj,o_proj")));
  ASSIGN_OR_RETURN(const int64_t prompt_len, flags.GetInt("prompt-tokens", 32));
  ASSIGN_OR_RETURN(const int64_t gen, flags.GetInt("gen-tokens", 32));
  ASSIGN_OR_RETURN(const int64_t repeats, flags.GetInt("repeats", 5));
  ASSIGN_OR_RETURN(const int64_t seed, flags.GetInt("seed", 1));
  if (streams < 1 || adapters < 1 || rank < 1 || gen < 2 || repeats < 1) {
    return absl::InvalidArgumentError("need --streams, --adapters, --rank, --repeats >= 1 and --gen-tokens >= 2");
  }
  ASSIGN_OR_RETURN(auto model, LoadModel(path));
  std::printf(
      "# lora-decode: %s, %lld threads, %lld streams over %lld rank-%lld adapters (%zu projections) and the base, "
      "vs %lld base-only streams; prompt %lld, %lld generated; median of %lld alternated repeats. Load average: %s\n",
      path.c_str(), static_cast<long long>(threads), static_cast<long long>(streams), static_cast<long long>(adapters),
      static_cast<long long>(rank), targets.size(), static_cast<long long>(streams), static_cast<long long>(prompt_len),
      static_cast<long long>(gen), static_cast<long long>(repeats), LoadAverage().c_str());

  // The adapters, through their files: what a worker does with --lora.
  const std::string dir = (std::filesystem::temp_directory_path() / "kvfleet-lora-bench").string();
  std::vector<std::shared_ptr<const model::LoraAdapter>> loras;
  std::vector<double> read_s;
  for (int64_t a = 0; a < adapters; ++a) {
    const std::string name = absl::StrCat("adapter-", a);
    RETURN_IF_ERROR(model::WritePeftAdapter(tools::RandomLoraAdapter(*model, {.name = name,
                                                                              .rank = static_cast<int32_t>(rank),
                                                                              .seed = static_cast<uint32_t>(seed + a),
                                                                              .magnitude = 0.02f,
                                                                              .targets = targets}),
                                            dir + "/" + name));
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(model::LoraAdapter read,
                     model::ReadPeftAdapter(dir + "/" + name, name, *model, {.max_rank = static_cast<int32_t>(rank)}));
    read_s.push_back(Seconds(Clock::now() - t0));
    loras.push_back(std::make_shared<const model::LoraAdapter>(std::move(read)));
  }
  const engine::ExecutorLimits limits =
      engine::EngineOptions::ExecutorLimitsFor(DecodeScheduler(streams, prompt_len), /*max_draft_tokens=*/0);
  ASSIGN_OR_RETURN(auto executor,
                   MakeExecutor(flags, *model, streams * BlocksFor(prompt_len + gen), static_cast<int>(threads), limits,
                                {.max_loras = static_cast<int32_t>(adapters), .max_rank = static_cast<int32_t>(rank)}));
  std::vector<double> slot_s, unload_s;
  for (int64_t a = 0; a < adapters; ++a) {
    const Clock::time_point t0 = Clock::now();
    RETURN_IF_ERROR(executor->LoadLora(static_cast<int32_t>(a), loras[static_cast<size_t>(a)]));
    const Clock::time_point t1 = Clock::now();
    RETURN_IF_ERROR(executor->UnloadLora(static_cast<int32_t>(a)));
    slot_s.push_back(Seconds(t1 - t0));
    unload_s.push_back(Seconds(Clock::now() - t1));
  }
  const double mib = static_cast<double>(loras.front()->parameters()) * 4.0 / (1 << 20);
  std::printf(
      "# each adapter %.2f MiB float32; read (disk to host, checked) median %.2f ms; into a %s slot median %.3f ms; "
      "unload median %.3f ms\n",
      mib, 1e3 * Percentile(read_s, 50), executor->info().device.ToString().c_str(), 1e3 * Percentile(slot_s, 50),
      1e3 * Percentile(unload_s, 50));

  std::vector<std::shared_ptr<const model::LoraAdapter>> mixed = loras;
  mixed.push_back(nullptr);  // the base model's share
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  const int64_t vocab = model->config().vocab_size;
  RETURN_IF_ERROR(DecodeOnce(*executor, streams, prompt_len, gen, rng, vocab).status());  // warm-up
  RETURN_IF_ERROR(DecodeOnce(*executor, streams, prompt_len, gen, rng, vocab, mixed).status());
  std::vector<double> base, adapted, ratios;
  for (int64_t r = 0; r < repeats; ++r) {
    ASSIGN_OR_RETURN(const DecodeRun b, DecodeOnce(*executor, streams, prompt_len, gen, rng, vocab));
    ASSIGN_OR_RETURN(const DecodeRun m, DecodeOnce(*executor, streams, prompt_len, gen, rng, vocab, mixed));
    base.push_back(b.decode_tokens_per_s);
    adapted.push_back(m.decode_tokens_per_s);
    ratios.push_back(m.decode_tokens_per_s / b.decode_tokens_per_s);
  }
  std::printf(
      "# base only: %.1f decode tok/s; over %lld adapters and the base: %.1f decode tok/s; "
      "ratio %.3fx (median of the per-repeat ratios; target >= 0.8x)\n",
      Percentile(base, 50), static_cast<long long>(adapters), Percentile(adapted, 50), Percentile(ratios, 50));
  std::printf(
      "{\"streams\": %lld, \"adapters\": %lld, \"rank\": %lld, \"projections\": %zu, \"base_tokens_per_s\": %.2f, "
      "\"mixed_tokens_per_s\": %.2f, \"ratio\": %.4f, \"read_ms\": %.3f, \"slot_load_ms\": %.4f, \"unload_ms\": "
      "%.4f}\n",
      static_cast<long long>(streams), static_cast<long long>(adapters), static_cast<long long>(rank), targets.size(),
      Percentile(base, 50), Percentile(adapted, 50), Percentile(ratios, 50), 1e3 * Percentile(read_s, 50),
      1e3 * Percentile(slot_s, 50), 1e3 * Percentile(unload_s, 50));
  std::filesystem::remove_all(dir);
  return absl::OkStatus();
}

}  // namespace kvfleet::bench
