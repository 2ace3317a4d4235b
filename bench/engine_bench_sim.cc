// kv-waste and concurrency: the real scheduler, KV cache manager and block
// pool driven by a seeded synthetic trace, without a model. A simulated step
// "computes" whatever the scheduler scheduled; a request that reaches the end
// of its known tokens gets a dummy token, and finishes at its output length.
//
// The contiguous baseline (one reservation of max_model_len per running
// request, as serving systems did before paging) is the same scheduler over
// a pool whose blocks are max_model_len tokens long: every request then holds
// exactly one block, i.e. one contiguous max_model_len reservation. So both
// systems see the same admission, chunked-prefill and preemption logic, and
// differ only in the allocation unit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/engine_bench.h"
#include "common/kv_sizing.h"
#include "common/status_macros.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/scheduler/scheduler.h"

namespace kvfleet::bench {
namespace {

// SmolLM2-135M (the default model): 30 layers, 3 KV heads, head_dim 64, KV in
// 16-bit values: 23,040 bytes per token.
constexpr KvShape kDefaultModelKvShape{.num_layers = 30, .num_kv_heads = 3, .head_dim = 64};
constexpr int64_t kBytesPerValue = 2;
constexpr int32_t kPagedBlockSize = 16;

struct TraceOptions {
  int64_t num_requests = 2000;
  uint64_t seed = 1;
  int32_t max_model_len = 2048;
  double prompt_median = 200, prompt_sigma = 1.0;
  double output_median = 100, output_sigma = 1.0;
};

struct TraceRequest {
  int32_t prompt_tokens;
  int32_t output_tokens;  // max_tokens; generation never stops earlier
};

// Lognormal prompt and output lengths. A prompt is capped at max_model_len - 1
// (room for one output token), then the output at max_model_len - prompt.
std::vector<TraceRequest> MakeTrace(const TraceOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::lognormal_distribution<double> prompt(std::log(o.prompt_median), o.prompt_sigma);
  std::lognormal_distribution<double> output(std::log(o.output_median), o.output_sigma);
  std::vector<TraceRequest> trace;
  trace.reserve(static_cast<size_t>(o.num_requests));
  for (int64_t i = 0; i < o.num_requests; ++i) {
    const int64_t p = std::clamp<int64_t>(std::llround(prompt(rng)), 1, o.max_model_len - 1);
    const int64_t n = std::clamp<int64_t>(std::llround(output(rng)), 1, o.max_model_len - p);
    trace.push_back({static_cast<int32_t>(p), static_cast<int32_t>(n)});
  }
  return trace;
}

void PrintLengths(const char* what, const std::vector<double>& v, double median, double sigma, const char* cap,
                  int64_t capped) {
  double sum = 0;
  for (double x : v) sum += x;
  std::printf(
      "  %s tokens: lognormal(median %.0f, sigma %.2f), %s (%lld capped) -> median %.0f, mean %.1f, p90 %.0f, "
      "p99 %.0f, max %.0f\n",
      what, median, sigma, cap, static_cast<long long>(capped), Percentile(v, 50), sum / static_cast<double>(v.size()),
      Percentile(v, 90), Percentile(v, 99), Percentile(v, 100));
}

void PrintTrace(const TraceOptions& o, const std::vector<TraceRequest>& trace) {
  std::vector<double> prompts, outputs;
  int64_t prompts_capped = 0, outputs_capped = 0;
  for (const TraceRequest& r : trace) {
    prompts.push_back(r.prompt_tokens);
    outputs.push_back(r.output_tokens);
    prompts_capped += r.prompt_tokens == o.max_model_len - 1;
    outputs_capped += r.prompt_tokens + r.output_tokens == o.max_model_len;  // an exact fit counts too
  }
  std::printf("trace: %lld requests, all queued at step 0, seed %llu, max_model_len %d\n",
              static_cast<long long>(o.num_requests), static_cast<unsigned long long>(o.seed), o.max_model_len);
  PrintLengths("prompt", prompts, o.prompt_median, o.prompt_sigma, "capped at max_model_len-1", prompts_capped);
  PrintLengths("output", outputs, o.output_median, o.output_sigma, "capped at max_model_len-prompt", outputs_capped);
}

struct SimConfig {
  int32_t block_size;
  int32_t num_blocks;
  int32_t max_num_seqs;
  int32_t max_num_batched_tokens;
  int32_t growth_reserve_blocks = engine::SchedulerConfig{}.growth_reserve_blocks;
};

// Figures over steps. "Saturated" steps end with requests still waiting: the
// steady state under load, without the drain at the end of the trace.
struct SimResult {
  int64_t steps = 0;
  int64_t saturated_steps = 0;
  double waste_saturated = 0;  // mean over saturated steps of unfilled / allocated slots
  double waste_all = 0;        // mean over all steps with a running request
  double running_saturated = 0;
  double running_all = 0;
  int32_t running_max = 0;
  int64_t preemptions = 0;
  int64_t computed_tokens = 0;  // KV positions computed, recomputation included
  int64_t needed_tokens = 0;    // KV positions the trace needs without preemption
};

// Finishes, for each chunk of one step, what the executor and sampler would do.
int64_t ApplyStep(const engine::SchedulerOutput& out, engine::Scheduler& scheduler, int64_t& computed) {
  int64_t finished = 0;
  for (const engine::ScheduledChunk& c : out.chunks) {
    engine::Request* r = c.request;
    r->num_computed_tokens += c.num_tokens;
    computed += c.num_tokens;
    if (r->num_computed_tokens < r->num_tokens()) continue;  // a prefill chunk
    r->tokens.push_back(0);
    if (r->num_output_tokens() >= r->params.stopping.max_tokens) {
      scheduler.Remove(r);
      r->state = engine::RequestState::kFinished;
      ++finished;
    }
  }
  return finished;
}

absl::StatusOr<SimResult> Simulate(const std::vector<TraceRequest>& trace, const SimConfig& config) {
  engine::BlockPool pool(config.num_blocks, nullptr);
  engine::KvCacheManager kv(pool, config.block_size, "sim", /*enable_prefix_caching=*/false);
  engine::Scheduler scheduler({.max_num_batched_tokens = config.max_num_batched_tokens,
                               .max_num_seqs = config.max_num_seqs,
                               .growth_reserve_blocks = config.growth_reserve_blocks},
                              kv);
  SimResult res;
  std::vector<std::unique_ptr<engine::Request>> requests;
  requests.reserve(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceRequest& t = trace[i];
    if (kv.BlocksFor(t.prompt_tokens + t.output_tokens) > config.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat("request ", i, " (", t.prompt_tokens + t.output_tokens,
                                                     " tokens) does not fit a pool of ", config.num_blocks,
                                                     " blocks of ", config.block_size, "; raise --budget-mib"));
    }
    engine::EngineRequest params{.id = RequestId(i + 1)};
    params.prompt.assign(static_cast<size_t>(t.prompt_tokens), 0);
    params.stopping.max_tokens = t.output_tokens;
    requests.push_back(std::make_unique<engine::Request>(std::move(params), 0, i, nullptr));
    scheduler.Add(requests.back().get());
    res.needed_tokens += t.prompt_tokens + t.output_tokens - 1;  // the last token's KV is never needed
  }
  int64_t remaining = static_cast<int64_t>(trace.size());
  double waste_sat_sum = 0, waste_all_sum = 0, run_sat_sum = 0, run_all_sum = 0;
  int64_t busy_steps = 0;
  while (remaining > 0) {
    const engine::SchedulerOutput out = scheduler.Schedule();
    remaining -= ApplyStep(out, scheduler, res.computed_tokens);
    ++res.steps;
    if (res.steps > 100'000'000) return absl::InternalError("simulation made no progress");
    int64_t allocated = 0, filled = 0;
    for (const engine::Request* r : scheduler.running()) {
      allocated += static_cast<int64_t>(r->block_table.size()) * config.block_size;
      filled += r->num_computed_tokens;
    }
    const int32_t running = scheduler.num_running();
    res.running_max = std::max(res.running_max, running);
    if (allocated == 0) continue;
    const double waste = 1.0 - static_cast<double>(filled) / static_cast<double>(allocated);
    ++busy_steps;
    waste_all_sum += waste;
    run_all_sum += running;
    if (scheduler.num_waiting() > 0) {
      ++res.saturated_steps;
      waste_sat_sum += waste;
      run_sat_sum += running;
    }
  }
  res.preemptions = scheduler.num_preemptions();
  if (busy_steps > 0) {
    res.waste_all = waste_all_sum / static_cast<double>(busy_steps);
    res.running_all = run_all_sum / static_cast<double>(busy_steps);
  }
  if (res.saturated_steps > 0) {
    res.waste_saturated = waste_sat_sum / static_cast<double>(res.saturated_steps);
    res.running_saturated = run_sat_sum / static_cast<double>(res.saturated_steps);
  }
  return res;
}

struct SimPair {
  int64_t token_slots = 0;
  SimResult contiguous, paged;
};

absl::StatusOr<SimPair> SimulateBoth(const std::vector<TraceRequest>& trace, const TraceOptions& trace_options,
                                     int64_t budget_mib, int32_t max_num_seqs, int32_t max_num_batched_tokens) {
  SimPair pair;
  pair.token_slots = KvTokensThatFit(kDefaultModelKvShape, kBytesPerValue, budget_mib << 20);
  const int32_t len = trace_options.max_model_len;
  // A contiguous reservation never grows, so it keeps no growth reserve.
  const SimConfig contiguous{.block_size = len,
                             .num_blocks = static_cast<int32_t>(pair.token_slots / len),
                             .max_num_seqs = max_num_seqs,
                             .max_num_batched_tokens = max_num_batched_tokens,
                             .growth_reserve_blocks = 0};
  const SimConfig paged{.block_size = kPagedBlockSize,
                        .num_blocks = static_cast<int32_t>(pair.token_slots / kPagedBlockSize),
                        .max_num_seqs = max_num_seqs,
                        .max_num_batched_tokens = max_num_batched_tokens};
  if (contiguous.num_blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--budget-mib ", budget_mib, " holds ", pair.token_slots,
                                                   " tokens: less than one max_model_len reservation"));
  }
  ASSIGN_OR_RETURN(pair.contiguous, Simulate(trace, contiguous));
  ASSIGN_OR_RETURN(pair.paged, Simulate(trace, paged));
  return pair;
}

struct SimFlags {
  TraceOptions trace;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
};

absl::StatusOr<SimFlags> ReadSimFlags(const Flags& flags) {
  SimFlags f;
  ASSIGN_OR_RETURN(f.trace.num_requests, flags.GetInt("requests", 2000));
  ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 1));
  f.trace.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(int64_t len, flags.GetInt("max-model-len", 2048));
  f.trace.max_model_len = static_cast<int32_t>(len);
  ASSIGN_OR_RETURN(f.trace.prompt_median, flags.GetDouble("prompt-median", 200));
  ASSIGN_OR_RETURN(f.trace.prompt_sigma, flags.GetDouble("prompt-sigma", 1.0));
  ASSIGN_OR_RETURN(f.trace.output_median, flags.GetDouble("output-median", 100));
  ASSIGN_OR_RETURN(f.trace.output_sigma, flags.GetDouble("output-sigma", 1.0));
  ASSIGN_OR_RETURN(int64_t seqs, flags.GetInt("max-num-seqs", 256));
  f.max_num_seqs = static_cast<int32_t>(seqs);
  ASSIGN_OR_RETURN(int64_t batched, flags.GetInt("max-num-batched-tokens", 2048));
  f.max_num_batched_tokens = static_cast<int32_t>(batched);
  if (f.trace.num_requests < 1 || len < 2 || len > (1 << 20) || seqs < 1 || batched < 1 || f.trace.prompt_median <= 0 ||
      f.trace.output_median <= 0 || f.trace.prompt_sigma < 0 || f.trace.output_sigma < 0) {
    return absl::InvalidArgumentError(
        "--requests, --max-num-seqs, --max-num-batched-tokens and the medians must be positive, the sigmas >= 0, "
        "--max-model-len in [2, 2^20]");
  }
  return f;
}

void PrintHeader(const char* name, const SimFlags& f) {
  std::printf(
      "%s: the real scheduler + KV cache manager + block pool, no model. Figures are token-slot counts "
      "over simulated steps: deterministic for a seed, no timing (machine noise does not apply).\n",
      name);
  std::printf(
      "KV bytes per token %lld (default model, 16-bit); max_num_seqs %d, max_num_batched_tokens %d, paged "
      "block %d tokens\n",
      static_cast<long long>(KvBytesPerToken(kDefaultModelKvShape, kBytesPerValue)), f.max_num_seqs,
      f.max_num_batched_tokens, kPagedBlockSize);
}

double RecomputeOverhead(const SimResult& r) {
  return static_cast<double>(r.computed_tokens) / static_cast<double>(r.needed_tokens) - 1.0;
}

std::string MeanMax(const SimResult& r) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f / %d", r.running_saturated, r.running_max);
  return buf;
}

}  // namespace

absl::Status RunKvWaste(const Flags& flags) {
  ASSIGN_OR_RETURN(SimFlags f, ReadSimFlags(flags));
  ASSIGN_OR_RETURN(int64_t budget_mib, flags.GetInt("budget-mib", 1024));
  const std::vector<TraceRequest> trace = MakeTrace(f.trace);
  PrintHeader("kv-waste", f);
  PrintTrace(f.trace, trace);
  ASSIGN_OR_RETURN(SimPair pair, SimulateBoth(trace, f.trace, budget_mib, f.max_num_seqs, f.max_num_batched_tokens));
  std::printf("KV budget %lld MiB = %lld token slots\n", static_cast<long long>(budget_mib),
              static_cast<long long>(pair.token_slots));
  std::printf("waste = allocated-but-unfilled slots / allocated slots over running requests, mean over steps\n");
  std::printf("%-34s %16s %12s %14s %10s %12s\n", "system", "waste saturated", "waste all", "saturated steps", "steps",
              "preemptions");
  auto row = [](const char* name, const SimResult& r) {
    std::printf("%-34s %15.2f%% %11.2f%% %14lld %10lld %12lld\n", name, 100 * r.waste_saturated, 100 * r.waste_all,
                static_cast<long long>(r.saturated_steps), static_cast<long long>(r.steps),
                static_cast<long long>(r.preemptions));
  };
  row("baseline: contiguous max_model_len", pair.contiguous);
  row("kvfleet: paged, 16-token blocks", pair.paged);
  std::printf(
      "ratio baseline/kvfleet waste: %.1fx saturated, %.1fx all steps (targets: kvfleet < 4%%, baseline "
      "60-80%%)\n",
      pair.contiguous.waste_saturated / pair.paged.waste_saturated, pair.contiguous.waste_all / pair.paged.waste_all);
  return absl::OkStatus();
}

absl::Status RunConcurrency(const Flags& flags) {
  ASSIGN_OR_RETURN(SimFlags f, ReadSimFlags(flags));
  ASSIGN_OR_RETURN(std::vector<int64_t> budgets, flags.GetIntList("budget-mib", "64,1024"));
  const std::vector<TraceRequest> trace = MakeTrace(f.trace);
  PrintHeader("concurrency", f);
  PrintTrace(f.trace, trace);
  std::printf(
      "requests running at once, mean over saturated steps (requests waiting) and max over all steps;\n"
      "baseline: contiguous reservation of max_model_len per request; kvfleet: paged 16-token blocks, "
      "preemption by recompute\n");
  std::printf("%10s %12s %20s %20s %12s %12s %14s\n", "budget MiB", "token slots", "baseline mean / max",
              "kvfleet mean / max", "ratio mean", "preemptions", "recompute +%");
  for (int64_t budget : budgets) {
    ASSIGN_OR_RETURN(SimPair pair, SimulateBoth(trace, f.trace, budget, f.max_num_seqs, f.max_num_batched_tokens));
    const std::string base = MeanMax(pair.contiguous);
    const std::string paged = MeanMax(pair.paged);
    std::printf("%10lld %12lld %20s %20s %11.2fx %12lld %13.1f%%\n", static_cast<long long>(budget),
                static_cast<long long>(pair.token_slots), base.c_str(), paged.c_str(),
                pair.paged.running_saturated / pair.contiguous.running_saturated,
                static_cast<long long>(pair.paged.preemptions), 100 * RecomputeOverhead(pair.paged));
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::bench
