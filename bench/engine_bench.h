// engine_bench: benchmarks of the continuous-batching engine, each printing
// its baseline, the kvfleet figure and their ratio from the same run.
//
// Two kinds of benchmark live here:
//   - model-free simulations (kv-waste, concurrency) that drive the real
//     scheduler, KV cache manager and block pool with a synthetic trace and
//     count token slots: exact, machine-independent figures;
//   - model runs (continuous-vs-static, shared-prefix, aggregate-decode) that
//     drive the real Engine over the executor of --device and time it with
//     steady_clock: wall-clock figures, noisy on a shared machine.
//
// Not a library and not a test: nothing here is run in CI. See bench/README.md.
//
//   engine_bench kv-waste --requests 2000 --seed 1
//   engine_bench aggregate-decode --streams 1,4,8,16,32
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flags/flags.h"
#include "engine/executor/model_executor.h"
#include "engine/scheduler/scheduler.h"
#include "model/lora/lora_adapter.h"
#include "model/model.h"

namespace kvfleet::bench {

using flags::Flags;

// /proc/loadavg's 1, 5 and 15-minute figures and the core count, to say
// how busy the machine was while a timed benchmark ran.
std::string LoadAverage();

// The default model, set by CMake (KVFLEET_DEFAULT_MODEL).
std::string DefaultModelPath();

// Nearest-rank percentile (p in [0, 100]) of an unsorted sample; 0 if empty.
double Percentile(std::vector<double> values, double p);

// The model, and an executor over it on --device (default auto) with
// 16-token blocks, taking batches up to `limits` (it borrows the model,
// which must outlive it).
absl::StatusOr<std::unique_ptr<model::Model>> LoadModel(const std::string& path);
absl::StatusOr<std::unique_ptr<engine::ModelExecutor>> MakeExecutor(const Flags& flags, const model::Model& model,
                                                                    int64_t num_blocks, int num_threads,
                                                                    const engine::ExecutorLimits& limits,
                                                                    engine::LoraLimits lora = {});

// N greedy streams of random prompts: one step prefills every prompt (the
// token budget holds them all) and samples each stream's first token; every
// later step decodes one token per stream, and only those are timed for
// decode_tokens_per_s. Used by aggregate-decode and by gpu_bench.
struct DecodeRun {
  double decode_tokens_per_s = 0;
  double prefill_s = 0;  // the first step: every prompt, and the first tokens
  int64_t decode_steps = 0;
};
engine::SchedulerConfig DecodeScheduler(int64_t streams, int64_t prompt_len);
// `loras` (may be empty): stream i runs under loras[i % size] (null: the base model).
absl::StatusOr<DecodeRun> DecodeOnce(engine::ModelExecutor& executor, int64_t streams, int64_t prompt_len, int64_t gen,
                                     std::mt19937_64& rng, int64_t vocab,
                                     const std::vector<std::shared_ptr<const model::LoraAdapter>>& loras = {});

// The subcommands; each parses its own flags.
absl::Status RunKvWaste(const Flags& flags);
absl::Status RunConcurrency(const Flags& flags);
absl::Status RunContinuousVsStatic(const Flags& flags);
absl::Status RunSharedPrefix(const Flags& flags);
absl::Status RunAggregateDecode(const Flags& flags);
absl::Status RunLoraDecode(const Flags& flags);

}  // namespace kvfleet::bench
