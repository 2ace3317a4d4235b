// tp_twin_bench: the CPU twin of tensor parallelism on the default model,
// at each degree asked for, against the whole model measured in the same
// run. For a prefill step (one prompt) and decode steps (one token for each
// of N sequences) it prints the median step time, its ratio against one
// rank's, and where the twin's extra time goes: the collectives' sums and
// copies, and the turn handoffs between the ranks' threads. It also prints
// the bytes one all-reduce moves: what each rank sends, the unit a real
// interconnect would carry. The configurations alternate within each
// repeat, so a noisy machine slows each alike.
//
// Not run in CI; see bench/README.md for results.
//
//   tp_twin_bench --degrees 1,2,3 --prompt-tokens 256 --decode-seqs 1,16
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/executor/cpu/cpu_executor.h"
#include "engine/executor/cpu/cpu_ranks.h"
#include "engine/executor/tensor_parallel_executor.h"
#include "model/model.h"

namespace kvfleet::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] = R"(usage: tp_twin_bench [--model PATH] [--threads 2] [--degrees 1,2,3]
       [--prompt-tokens 256] [--decode-seqs 1,16] [--context 128] [--repeats 7]
)";

constexpr int32_t kBlockSize = 16;

// One degree's executor, and its collectives' costs when it has ranks.
struct Config {
  int32_t degree = 1;
  std::unique_ptr<engine::ModelExecutor> executor;
  engine::TensorParallelExecutor* tp = nullptr;
};

// One kind of step: its batch and each degree's measured times.
struct Step {
  std::string name;
  engine::ForwardBatch batch;
  int64_t tokens = 0;
  std::vector<std::vector<double>> seconds;          // [degree][repeat]
  std::vector<engine::InProcessGroup::Costs> costs;  // [degree], summed over repeats
};

engine::ForwardBatch PrefillBatch(int64_t tokens) {
  engine::ForwardBatchBuilder b(kBlockSize);
  std::vector<model::TokenId> prompt;
  for (int64_t i = 0; i < tokens; ++i) prompt.push_back(static_cast<model::TokenId>(100 + (i * 37) % 20000));
  std::vector<BlockId> blocks;
  for (int64_t i = 0; i < (tokens + kBlockSize - 1) / kBlockSize; ++i) blocks.emplace_back(static_cast<int32_t>(i));
  b.AddChunk(prompt, 0, blocks, engine::LogitsWanted::kLast);
  return b.Finish();
}

// `seqs` sequences of `context` tokens, each decoding one more.
engine::ForwardBatch DecodeBatch(int64_t seqs, int64_t context) {
  engine::ForwardBatchBuilder b(kBlockSize);
  const int64_t per_seq = context / kBlockSize + 1;
  for (int64_t s = 0; s < seqs; ++s) {
    std::vector<BlockId> blocks;
    for (int64_t i = 0; i < per_seq; ++i) blocks.emplace_back(static_cast<int32_t>(s * per_seq + i));
    const std::vector<model::TokenId> token = {static_cast<model::TokenId>(200 + s)};
    b.AddChunk(token, static_cast<int32_t>(context), blocks, engine::LogitsWanted::kLast);
  }
  return b.Finish();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::Status Main(const flags::Flags& f) {
  const std::string path = f.GetString("model", KVFLEET_DEFAULT_MODEL_PATH);
  ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 2));
  ASSIGN_OR_RETURN(std::vector<int64_t> degrees, f.GetIntList("degrees", "1,2,3"));
  ASSIGN_OR_RETURN(int64_t prompt_tokens, f.GetInt("prompt-tokens", 256));
  ASSIGN_OR_RETURN(std::vector<int64_t> decode_seqs, f.GetIntList("decode-seqs", "1,16"));
  ASSIGN_OR_RETURN(int64_t context, f.GetInt("context", 128));
  ASSIGN_OR_RETURN(int64_t repeats, f.GetInt("repeats", 7));
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::Load(path));

  std::vector<Step> steps;
  steps.push_back(
      {.name = absl::StrCat("prefill ", prompt_tokens), .batch = PrefillBatch(prompt_tokens), .tokens = prompt_tokens});
  int64_t blocks = (prompt_tokens + kBlockSize - 1) / kBlockSize;
  for (int64_t seqs : decode_seqs) {
    steps.push_back({.name = absl::StrCat("decode x", seqs), .batch = DecodeBatch(seqs, context), .tokens = seqs});
    blocks = std::max(blocks, seqs * (context / kBlockSize + 1));
  }
  const engine::ExecutorOptions options{
      .num_blocks = blocks,
      .block_size = kBlockSize,
      .num_threads = static_cast<int>(threads),
      .limits = {.max_batch_tokens = static_cast<int32_t>(
                     std::max<int64_t>(prompt_tokens, *std::max_element(decode_seqs.begin(), decode_seqs.end()))),
                 .max_batch_chunks = 256}};
  std::vector<Config> configs;
  for (int64_t d : degrees) {
    Config c{.degree = static_cast<int32_t>(d)};
    engine::ExecutorOptions o = options;
    o.tensor_parallel = c.degree;
    if (d == 1) {
      ASSIGN_OR_RETURN(c.executor, engine::CpuExecutor::Create(*m, o));
    } else {
      ASSIGN_OR_RETURN(
          std::unique_ptr<engine::TensorParallelExecutor> tp,
          engine::TensorParallelExecutor::Create(*m, o, std::make_unique<engine::CpuRanks>(o.num_threads)));
      c.tp = tp.get();
      c.executor = std::move(tp);
    }
    std::printf("degree %d: %s, weights %.1f MB, KV %.1f KB/token\n", c.degree, c.executor->info().numerics.c_str(),
                c.executor->info().weight_bytes / 1e6, c.executor->info().kv_bytes_per_token / 1e3);
    configs.push_back(std::move(c));
  }
  for (Step& s : steps) {
    s.seconds.assign(configs.size(), {});
    s.costs.assign(configs.size(), {});
  }
  // One warm-up of each, then the repeats, configurations alternating.
  for (int64_t r = -1; r < repeats; ++r) {
    for (Step& s : steps) {
      for (size_t c = 0; c < configs.size(); ++c) {
        const engine::InProcessGroup::Costs before =
            configs[c].tp ? configs[c].tp->collective_costs() : engine::InProcessGroup::Costs{};
        const Clock::time_point start = Clock::now();
        RETURN_IF_ERROR(configs[c].executor->Forward(s.batch).status());
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (r < 0) continue;
        s.seconds[c].push_back(seconds);
        if (configs[c].tp != nullptr) {
          const engine::InProcessGroup::Costs after = configs[c].tp->collective_costs();
          s.costs[c].meetings += after.meetings - before.meetings;
          s.costs[c].message_bytes += after.message_bytes - before.message_bytes;
          s.costs[c].meet_seconds += after.meet_seconds - before.meet_seconds;
          s.costs[c].handoff_seconds += after.handoff_seconds - before.handoff_seconds;
        }
      }
    }
  }
  std::printf("\n%-14s %6s %10s %8s %12s %12s %10s %14s\n", "step", "ranks", "ms/step", "vs 1", "collectives",
              "sums+copies", "handoffs", "bytes/allreduce");
  for (const Step& s : steps) {
    const double whole = Median(s.seconds[0]);
    for (size_t c = 0; c < configs.size(); ++c) {
      const double median = Median(s.seconds[c]);
      const engine::InProcessGroup::Costs& k = s.costs[c];
      double step_sum = 0;
      for (double x : s.seconds[c]) step_sum += x;
      const double meet_share = step_sum > 0 ? k.meet_seconds / step_sum : 0;
      const double handoff_share = step_sum > 0 ? k.handoff_seconds / step_sum : 0;
      // One step's all-reduces move T × hidden floats each (the logits' gather aside).
      const int64_t allreduce_bytes = s.tokens * m->config().hidden_size * static_cast<int64_t>(sizeof(float));
      std::printf("%-14s %6d %10.2f %7.2fx %12lld %11.1f%% %9.1f%% %14lld\n", s.name.c_str(), configs[c].degree,
                  median * 1e3, median / whole, static_cast<long long>(k.meetings / std::max<int64_t>(1, repeats)),
                  100 * meet_share, 100 * handoff_share,
                  configs[c].degree > 1 ? static_cast<long long>(allreduce_bytes) : 0LL);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvfleet::bench

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kvfleet::bench::kUsage, stdout);
      return 0;
    }
  }
  kvfleet::InitLogging("warn");
  absl::StatusOr<kvfleet::flags::Flags> f = kvfleet::flags::Flags::Parse(
      args, {"model", "threads", "degrees", "prompt-tokens", "decode-seqs", "context", "repeats"}, {});
  absl::Status s = f.ok() ? kvfleet::bench::Main(*f) : f.status();
  if (!s.ok()) {
    std::fprintf(stderr, "tp_twin_bench: %s\n%s", std::string(s.message()).c_str(), kvfleet::bench::kUsage);
    return 1;
  }
  return 0;
}
