// continuous-vs-static, shared-prefix and aggregate-decode: the real Engine
// over the CPU executor and a real model, driven synchronously with Step()
// and timed with steady_clock. Prompts are random token ids and every
// request decodes greedily with ignore_eos, so each one generates exactly its
// max_tokens and the work is the same from run to run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/engine_bench.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_q8.h"

namespace kvfleet::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

constexpr char kNoiseNote[] =
    "Wall-clock figures from a shared, noisy 2-core machine: compare the ratios, not the absolute numbers.";

// Records when a request's first token and its end arrive.
class TimingSink : public engine::OutputSink {
 public:
  void OnOutput(engine::RequestOutput out) override {
    const Clock::time_point now = Clock::now();
    if (generated == 0 && !out.new_tokens.empty()) first_token = now;
    generated += static_cast<int64_t>(out.new_tokens.size());
    if (out.finished) {
      finished = true;
      finish = now;
      usage = out.usage;
      reason = out.finish_reason;
    }
  }

  Clock::time_point arrival, first_token, finish;
  int64_t generated = 0;
  bool finished = false;
  engine::Usage usage;
  engine::FinishReason reason = engine::FinishReason::kLength;
};

struct Job {
  std::vector<model::TokenId> prompt;
  int32_t max_tokens = 1;
  double arrival_s = 0;  // after the start of the run
};

struct RunOptions {
  engine::SchedulerConfig scheduler;
  bool prefix_caching = false;
};

struct RunResult {
  double wall_s = 0;              // start to the last finish
  std::vector<TimingSink> sinks;  // one per job, in job order
  int32_t peak_blocks_used = 0;
  engine::EngineStats stats;  // after the last step

  int64_t generated() const {
    int64_t n = 0;
    for (const TimingSink& s : sinks) n += s.generated;
    return n;
  }
  std::vector<double> Latencies() const {
    std::vector<double> v;
    for (const TimingSink& s : sinks) v.push_back(Seconds(s.finish - s.arrival));
    return v;
  }
  std::vector<double> TimesToFirstToken() const {
    std::vector<double> v;
    for (const TimingSink& s : sinks) v.push_back(Seconds(s.first_token - s.arrival));
    return v;
  }
};

std::vector<model::TokenId> RandomTokens(std::mt19937_64& rng, int64_t n, int64_t vocab_size) {
  std::uniform_int_distribution<model::TokenId> token(0, static_cast<model::TokenId>(vocab_size - 1));
  std::vector<model::TokenId> out(static_cast<size_t>(n));
  for (model::TokenId& t : out) t = token(rng);
  return out;
}

engine::EngineRequest MakeRequest(size_t index, const Job& job) {
  engine::EngineRequest r{.id = RequestId(index + 1), .prompt = job.prompt};
  r.sampling.temperature = 0.0f;
  r.stopping.max_tokens = job.max_tokens;
  r.stopping.ignore_eos = true;
  return r;
}

absl::Status CheckAllFinished(const RunResult& res, const std::vector<Job>& jobs) {
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TimingSink& s = res.sinks[i];
    if (!s.finished || s.reason != engine::FinishReason::kLength || s.generated != jobs[i].max_tokens) {
      return absl::InternalError(absl::StrCat("request ", i + 1, " ended after ", s.generated, " of ",
                                              jobs[i].max_tokens, " tokens (finished=", s.finished, ")"));
    }
  }
  return absl::OkStatus();
}

// Submits each job at its arrival time and steps the engine until all have
// finished. A job that arrives during a step is submitted after it; its
// latency still counts from its arrival time.
absl::StatusOr<RunResult> RunJobs(engine::ModelExecutor& executor, const RunOptions& options,
                                  const std::vector<Job>& jobs) {
  engine::Engine engine(
      executor, {.model_id = "bench", .scheduler = options.scheduler, .enable_prefix_caching = options.prefix_caching});
  RunResult res;
  res.sinks.resize(jobs.size());  // never resized again: the engine holds pointers
  const Clock::time_point start = Clock::now();
  size_t next = 0;
  while (true) {
    const double now_s = Seconds(Clock::now() - start);
    for (; next < jobs.size() && jobs[next].arrival_s <= now_s; ++next) {
      res.sinks[next].arrival =
          start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(jobs[next].arrival_s));
      RETURN_IF_ERROR(engine.Submit(MakeRequest(next, jobs[next]), &res.sinks[next]));
    }
    if (!engine.HasWork()) {
      if (next == jobs.size()) break;
      std::this_thread::sleep_for(std::chrono::duration<double>(jobs[next].arrival_s - now_s));
      continue;
    }
    RETURN_IF_ERROR(engine.Step());
    res.stats = engine.Stats();
    res.peak_blocks_used = std::max(res.peak_blocks_used, res.stats.blocks_used);
  }
  Clock::time_point last = start;
  for (const TimingSink& s : res.sinks) last = std::max(last, s.finish);
  res.wall_s = Seconds(last - start);
  RETURN_IF_ERROR(CheckAllFinished(res, jobs));
  return res;
}

int64_t BlocksFor(int64_t tokens) { return (tokens + 15) / 16; }

// ---- continuous-vs-static ----------------------------------------------------

struct CvsConfig {
  std::string model_path;
  int64_t threads, num_requests, prompt_min, prompt_max, output_min, output_max, max_num_seqs, repeats, seed;
  double arrival_rate;  // requests/s; 0: all at t=0
};

absl::StatusOr<CvsConfig> ReadCvsConfig(const Flags& flags) {
  CvsConfig c;
  c.model_path = flags.GetString("model", DefaultModelPath());
  ASSIGN_OR_RETURN(c.threads, flags.GetInt("threads", 2));
  ASSIGN_OR_RETURN(c.num_requests, flags.GetInt("requests", 24));
  ASSIGN_OR_RETURN(c.prompt_min, flags.GetInt("prompt-min", 16));
  ASSIGN_OR_RETURN(c.prompt_max, flags.GetInt("prompt-max", 128));
  ASSIGN_OR_RETURN(c.output_min, flags.GetInt("output-min", 8));
  ASSIGN_OR_RETURN(c.output_max, flags.GetInt("output-max", 96));
  ASSIGN_OR_RETURN(c.max_num_seqs, flags.GetInt("max-num-seqs", 8));
  ASSIGN_OR_RETURN(c.repeats, flags.GetInt("repeats", 1));
  ASSIGN_OR_RETURN(c.arrival_rate, flags.GetDouble("arrival-rate", 0));
  ASSIGN_OR_RETURN(c.seed, flags.GetInt("seed", 1));
  if (c.num_requests < 1 || c.prompt_min < 1 || c.prompt_max < c.prompt_min || c.output_min < 1 ||
      c.output_max < c.output_min || c.max_num_seqs < 1 || c.threads < 1 || c.repeats < 1 || c.arrival_rate < 0) {
    return absl::InvalidArgumentError(
        "need --requests, --max-num-seqs, --threads, --repeats >= 1, 1 <= min <= max "
        "for prompts and outputs, --arrival-rate >= 0");
  }
  return c;
}

std::vector<Job> MakeCvsJobs(const CvsConfig& c, int64_t vocab) {
  std::mt19937_64 rng(static_cast<uint64_t>(c.seed));
  std::uniform_int_distribution<int64_t> prompt_len(c.prompt_min, c.prompt_max);
  std::uniform_int_distribution<int64_t> output_len(c.output_min, c.output_max);
  std::exponential_distribution<double> gap(c.arrival_rate > 0 ? c.arrival_rate : 1.0);
  std::vector<Job> jobs;
  double t = 0;
  for (int64_t i = 0; i < c.num_requests; ++i) {
    Job job{.prompt = RandomTokens(rng, prompt_len(rng), vocab), .max_tokens = static_cast<int32_t>(output_len(rng))};
    if (c.arrival_rate > 0 && i > 0) t += gap(rng);
    job.arrival_s = t;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

double Throughput(const RunResult& r) { return static_cast<double>(r.generated()) / r.wall_s; }

// The run with the median throughput.
const RunResult& MedianRun(std::vector<RunResult>& runs) {
  std::sort(runs.begin(), runs.end(),
            [](const RunResult& a, const RunResult& b) { return Throughput(a) < Throughput(b); });
  return runs[runs.size() / 2];
}

void PrintModeRow(const char* name, const RunResult& r) {
  std::printf("%-26s %8.2f %14.1f %14.2f %14.2f %14.2f %8lld\n", name, r.wall_s, Throughput(r),
              Percentile(r.Latencies(), 50), Percentile(r.Latencies(), 99), Percentile(r.TimesToFirstToken(), 50),
              static_cast<long long>(r.stats.steps));
}

void PrintCvsResults(const RunResult& stat, const RunResult& cont) {
  std::printf("%-26s %8s %14s %14s %14s %14s %8s\n", "mode", "wall s", "output tok/s", "p50 latency s", "p99 latency s",
              "p50 TTFT s", "steps");
  PrintModeRow("baseline: static batching", stat);
  PrintModeRow("kvfleet: continuous", cont);
  std::printf(
      "ratio kvfleet/baseline: throughput %.2fx, p50 latency %.2fx, p99 latency %.2fx, steps %.2fx "
      "(latency and steps: lower is better; target: throughput >= 2x at equal or better p50)\n",
      Throughput(cont) / Throughput(stat), Percentile(cont.Latencies(), 50) / Percentile(stat.Latencies(), 50),
      Percentile(cont.Latencies(), 99) / Percentile(stat.Latencies(), 99),
      static_cast<double>(cont.stats.steps) / static_cast<double>(stat.stats.steps));
}

// ---- shared-prefix -----------------------------------------------------------

struct SharedPrefixConfig {
  std::string model_path;
  int64_t threads, num_requests, prefix_len, suffix_len, output_len, batched_tokens, seed;
};

absl::StatusOr<SharedPrefixConfig> ReadSharedPrefixConfig(const Flags& flags) {
  SharedPrefixConfig c;
  c.model_path = flags.GetString("model", DefaultModelPath());
  ASSIGN_OR_RETURN(c.threads, flags.GetInt("threads", 2));
  ASSIGN_OR_RETURN(c.num_requests, flags.GetInt("requests", 32));
  ASSIGN_OR_RETURN(c.prefix_len, flags.GetInt("prefix", 512));
  ASSIGN_OR_RETURN(c.suffix_len, flags.GetInt("suffix", 16));
  ASSIGN_OR_RETURN(c.output_len, flags.GetInt("output", 16));
  ASSIGN_OR_RETURN(c.batched_tokens, flags.GetInt("max-num-batched-tokens", 512));
  ASSIGN_OR_RETURN(c.seed, flags.GetInt("seed", 1));
  if (c.num_requests < 1 || c.prefix_len < 0 || c.suffix_len < 1 || c.output_len < 1 || c.batched_tokens < 1 ||
      c.threads < 1) {
    return absl::InvalidArgumentError(
        "need --requests, --suffix, --output, --threads and --max-num-batched-tokens "
        ">= 1 and --prefix >= 0");
  }
  return c;
}

// Every request: the same prefix, then its own random suffix.
std::vector<Job> MakeSharedPrefixJobs(const SharedPrefixConfig& c, int64_t vocab) {
  std::mt19937_64 rng(static_cast<uint64_t>(c.seed));
  const std::vector<model::TokenId> prefix = RandomTokens(rng, c.prefix_len, vocab);
  std::vector<Job> jobs;
  for (int64_t i = 0; i < c.num_requests; ++i) {
    Job job{.prompt = prefix, .max_tokens = static_cast<int32_t>(c.output_len)};
    const std::vector<model::TokenId> suffix = RandomTokens(rng, c.suffix_len, vocab);
    job.prompt.insert(job.prompt.end(), suffix.begin(), suffix.end());
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// Σ prompt − Σ cached prompt tokens: the prompt tokens the run computed.
int64_t PrefillComputed(const RunResult& r) {
  int64_t n = 0;
  for (const TimingSink& s : r.sinks) n += s.usage.prompt_tokens - s.usage.cached_prompt_tokens;
  return n;
}

void PrintSharedPrefixResults(const RunResult& off, const RunResult& on) {
  std::printf("%-32s %18s %24s %8s %12s\n", "prefix caching", "peak KV blocks", "prefill tokens computed", "wall s",
              "preemptions");
  auto row = [](const char* name, const RunResult& r) {
    std::printf("%-32s %18d %24lld %8.2f %12lld\n", name, r.peak_blocks_used,
                static_cast<long long>(PrefillComputed(r)), r.wall_s, static_cast<long long>(r.stats.preemptions));
  };
  row("baseline: off", off);
  row("kvfleet: on", on);
  std::printf("ratio baseline/kvfleet: peak blocks %.2fx, prefill tokens %.2fx, wall time %.2fx\n",
              static_cast<double>(off.peak_blocks_used) / on.peak_blocks_used,
              static_cast<double>(PrefillComputed(off)) / static_cast<double>(PrefillComputed(on)),
              off.wall_s / on.wall_s);
}

}  // namespace

absl::Status RunContinuousVsStatic(const Flags& flags) {
  ASSIGN_OR_RETURN(const CvsConfig c, ReadCvsConfig(flags));
  ASSIGN_OR_RETURN(auto model, LoadModel(c.model_path));
  // Enough blocks for max_num_seqs of the longest requests, so memory never
  // limits either mode, and a token budget that admits a whole static batch
  // of the longest prompts in one step, so static batches are always full.
  const int64_t num_blocks = c.max_num_seqs * BlocksFor(c.prompt_max + c.output_max) + c.max_num_seqs;
  const int32_t batched_tokens = static_cast<int32_t>(std::max<int64_t>(512, c.max_num_seqs * c.prompt_max));
  ASSIGN_OR_RETURN(
      auto executor,
      MakeExecutor(flags, *model, num_blocks, static_cast<int>(c.threads),
                   engine::EngineOptions::ExecutorLimitsFor(
                       {.max_num_batched_tokens = batched_tokens, .max_num_seqs = static_cast<int32_t>(c.max_num_seqs)},
                       /*max_draft_tokens=*/0)));
  const std::vector<Job> jobs = MakeCvsJobs(c, model->config().vocab_size);
  const std::string arrivals = c.arrival_rate > 0 ? absl::StrCat("Poisson arrivals at ", c.arrival_rate, " req/s")
                                                  : std::string("all arriving at t=0");
  std::printf("continuous-vs-static: %s, %lld threads. %s Load average: %s\n", c.model_path.c_str(),
              static_cast<long long>(c.threads), kNoiseNote, LoadAverage().c_str());
  std::printf(
      "%lld requests, %s; prompt U[%lld, %lld], output U[%lld, %lld] tokens (greedy, ignore_eos, seed %lld); "
      "max_num_seqs %lld, max_num_batched_tokens %d, %lld KV blocks (no preemption); median of %lld "
      "alternating runs per mode after a warm-up\n",
      static_cast<long long>(c.num_requests), arrivals.c_str(), static_cast<long long>(c.prompt_min),
      static_cast<long long>(c.prompt_max), static_cast<long long>(c.output_min), static_cast<long long>(c.output_max),
      static_cast<long long>(c.seed), static_cast<long long>(c.max_num_seqs), batched_tokens,
      static_cast<long long>(num_blocks), static_cast<long long>(c.repeats));

  RunOptions options{
      .scheduler = {.max_num_batched_tokens = batched_tokens, .max_num_seqs = static_cast<int32_t>(c.max_num_seqs)}};
  // Warm-up: first touches of weights and KV pages stay out of both modes.
  RETURN_IF_ERROR(RunJobs(*executor, options, {{.prompt = jobs[0].prompt, .max_tokens = 4}}).status());
  std::vector<RunResult> stat, cont;
  for (int64_t r = 0; r < c.repeats; ++r) {
    options.scheduler.static_batching = true;
    ASSIGN_OR_RETURN(RunResult s, RunJobs(*executor, options, jobs));
    stat.push_back(std::move(s));
    options.scheduler.static_batching = false;
    ASSIGN_OR_RETURN(RunResult k, RunJobs(*executor, options, jobs));
    cont.push_back(std::move(k));
  }
  PrintCvsResults(MedianRun(stat), MedianRun(cont));
  std::printf("load average at the end: %s\n", LoadAverage().c_str());
  return absl::OkStatus();
}

absl::Status RunSharedPrefix(const Flags& flags) {
  ASSIGN_OR_RETURN(const SharedPrefixConfig c, ReadSharedPrefixConfig(flags));
  ASSIGN_OR_RETURN(auto model, LoadModel(c.model_path));
  // Room for every request at once without sharing: memory never limits the
  // run without prefix caching either.
  const int64_t num_blocks = c.num_requests * BlocksFor(c.prefix_len + c.suffix_len + c.output_len) + 16;
  const engine::SchedulerConfig sched{.max_num_batched_tokens = static_cast<int32_t>(c.batched_tokens),
                                      .max_num_seqs = static_cast<int32_t>(c.num_requests)};
  ASSIGN_OR_RETURN(auto executor,
                   MakeExecutor(flags, *model, num_blocks, static_cast<int>(c.threads),
                                engine::EngineOptions::ExecutorLimitsFor(sched, /*max_draft_tokens=*/0)));
  const std::vector<Job> jobs = MakeSharedPrefixJobs(c, model->config().vocab_size);
  std::printf("shared-prefix: %s, %lld threads. %s Load average: %s\n", c.model_path.c_str(),
              static_cast<long long>(c.threads), kNoiseNote, LoadAverage().c_str());
  std::printf(
      "%lld requests at t=0: a shared %lld-token prefix + a unique %lld-token suffix (%lld prompt tokens in "
      "all), %lld output tokens each (greedy, ignore_eos); max_num_seqs %lld, max_num_batched_tokens %lld, "
      "%lld KV blocks of 16\n",
      static_cast<long long>(c.num_requests), static_cast<long long>(c.prefix_len),
      static_cast<long long>(c.suffix_len), static_cast<long long>(c.num_requests * (c.prefix_len + c.suffix_len)),
      static_cast<long long>(c.output_len), static_cast<long long>(c.num_requests),
      static_cast<long long>(c.batched_tokens), static_cast<long long>(num_blocks));
  RETURN_IF_ERROR(RunJobs(*executor, {.scheduler = sched}, {{.prompt = jobs[0].prompt, .max_tokens = 2}}).status());
  ASSIGN_OR_RETURN(RunResult off, RunJobs(*executor, {.scheduler = sched, .prefix_caching = false}, jobs));
  ASSIGN_OR_RETURN(RunResult on, RunJobs(*executor, {.scheduler = sched, .prefix_caching = true}, jobs));
  PrintSharedPrefixResults(off, on);
  std::printf("load average at the end: %s\n", LoadAverage().c_str());
  return absl::OkStatus();
}

// N streams: one step prefills every prompt (the token budget holds them
// all) and samples each stream's first token; every later step decodes one
// token per stream. Only those later steps are timed.
engine::SchedulerConfig DecodeScheduler(int64_t streams, int64_t prompt_len) {
  return {.max_num_batched_tokens = static_cast<int32_t>(streams * prompt_len),
          .max_num_seqs = static_cast<int32_t>(streams)};
}

absl::StatusOr<DecodeRun> DecodeOnce(engine::ModelExecutor& executor, int64_t streams, int64_t prompt_len, int64_t gen,
                                     std::mt19937_64& rng, int64_t vocab,
                                     const std::vector<std::shared_ptr<const model::LoraAdapter>>& loras) {
  engine::Engine engine(
      executor,
      {.model_id = "bench", .scheduler = DecodeScheduler(streams, prompt_len), .enable_prefix_caching = false});
  std::vector<TimingSink> sinks(static_cast<size_t>(streams));
  for (int64_t i = 0; i < streams; ++i) {
    const Job job{.prompt = RandomTokens(rng, prompt_len, vocab), .max_tokens = static_cast<int32_t>(gen)};
    engine::EngineRequest request = MakeRequest(static_cast<size_t>(i), job);
    if (!loras.empty()) request.lora = loras[static_cast<size_t>(i) % loras.size()];
    RETURN_IF_ERROR(engine.Submit(std::move(request), &sinks[static_cast<size_t>(i)]));
  }
  DecodeRun run;
  const Clock::time_point t0 = Clock::now();
  RETURN_IF_ERROR(engine.Step());
  const Clock::time_point t1 = Clock::now();
  for (const TimingSink& s : sinks) {
    if (s.generated != 1) return absl::InternalError("the first step did not prefill every stream");
  }
  while (engine.HasWork()) {
    RETURN_IF_ERROR(engine.Step());
    ++run.decode_steps;
  }
  const Clock::time_point t2 = Clock::now();
  int64_t decoded = 0;
  for (const TimingSink& s : sinks) decoded += s.generated - 1;
  if (decoded != streams * (gen - 1)) return absl::InternalError("a stream ended early");
  run.prefill_s = Seconds(t1 - t0);
  run.decode_tokens_per_s = static_cast<double>(decoded) / Seconds(t2 - t1);
  return run;
}

// --isa avx2 runs the float and the 8-bit kernels on AVX2 on a machine that
// has AVX-512 too: both sets' figures from one machine.
absl::Status ForceIsaFlag(const std::string& isa) {
  if (isa.empty() || isa == "best") return absl::OkStatus();
  if (isa != "avx2") return absl::InvalidArgumentError("--isa takes avx2 or best, not \"" + isa + "\"");
  kernels::ForceFloatDotIsa(kernels::FloatDotIsa::kAvx2);
  kernels::ForceQ8DotIsa(kernels::Q8DotIsa::kAvx2);
  return absl::OkStatus();
}

absl::Status RunAggregateDecode(const Flags& flags) {
  const std::string path = flags.GetString("model", DefaultModelPath());
  RETURN_IF_ERROR(ForceIsaFlag(flags.GetString("isa", "")));
  ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 2));
  ASSIGN_OR_RETURN(std::vector<int64_t> streams, flags.GetIntList("streams", "1,4,8,16,32"));
  ASSIGN_OR_RETURN(int64_t prompt_len, flags.GetInt("prompt-tokens", 32));
  ASSIGN_OR_RETURN(int64_t gen, flags.GetInt("gen-tokens", 32));
  ASSIGN_OR_RETURN(int64_t repeats, flags.GetInt("repeats", 3));
  ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 1));
  if (prompt_len < 1 || gen < 2 || repeats < 1 || threads < 1) {
    return absl::InvalidArgumentError("need --prompt-tokens >= 1, --gen-tokens >= 2, --repeats >= 1, --threads >= 1");
  }
  ASSIGN_OR_RETURN(auto model, LoadModel(path));
  const int64_t vocab = model->config().vocab_size;
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::printf(
      "# aggregate-decode: %s, %lld threads, prompt %lld tokens, %lld generated per stream (greedy, "
      "ignore_eos), median of %lld after one warm-up. %s Load average: %s\n",
      path.c_str(), static_cast<long long>(threads), static_cast<long long>(prompt_len), static_cast<long long>(gen),
      static_cast<long long>(repeats), kNoiseNote, LoadAverage().c_str());
  double first = 0;  // the first row's aggregate tokens/s: the scaling baseline
  for (int64_t n : streams) {
    ASSIGN_OR_RETURN(auto executor,
                     MakeExecutor(flags, *model, n * BlocksFor(prompt_len + gen), static_cast<int>(threads),
                                  engine::EngineOptions::ExecutorLimitsFor(DecodeScheduler(n, prompt_len),
                                                                           /*max_draft_tokens=*/0)));
    RETURN_IF_ERROR(DecodeOnce(*executor, n, prompt_len, gen, rng, vocab).status());  // warm-up
    std::vector<DecodeRun> runs;
    for (int64_t r = 0; r < repeats; ++r) {
      ASSIGN_OR_RETURN(DecodeRun run, DecodeOnce(*executor, n, prompt_len, gen, rng, vocab));
      runs.push_back(run);
    }
    std::sort(runs.begin(), runs.end(),
              [](const DecodeRun& a, const DecodeRun& b) { return a.decode_tokens_per_s < b.decode_tokens_per_s; });
    const DecodeRun& med = runs[runs.size() / 2];
    if (first == 0) first = med.decode_tokens_per_s;
    std::printf("# %3lld streams: %8.1f decode tok/s aggregate, %.2fx the %lld-stream figure\n",
                static_cast<long long>(n), med.decode_tokens_per_s, med.decode_tokens_per_s / first,
                static_cast<long long>(streams.front()));
    std::printf(
        "{\"streams\": %lld, \"threads\": %lld, \"prompt_tokens\": %lld, \"gen_tokens\": %lld, "
        "\"decode_tokens_per_s\": %.2f, \"prefill_s\": %.4f, \"decode_steps\": %lld}\n",
        static_cast<long long>(n), static_cast<long long>(threads), static_cast<long long>(prompt_len),
        static_cast<long long>(gen), med.decode_tokens_per_s, med.prefill_s, static_cast<long long>(med.decode_steps));
    std::fflush(stdout);
  }
  std::printf("# load average at the end: %s\n", LoadAverage().c_str());
  return absl::OkStatus();
}

}  // namespace kvfleet::bench
