// gpu_bench: the CUDA backend on one GPU, every figure against a limit
// measured in the same run (bench/README.md, "gpu_bench"):
//   1. the device's read bandwidth (a read-only sum over 4 GiB) and its copy
//      bandwidth (bytes read + written);
//   2. decode tokens/s at 1, 8, 64 and 256 streams on each model given,
//      against its bandwidth roofline (bytes a step must read ÷ read bandwidth);
//   3. the paged-attention kernels' bytes/s at 64 sequences of 1k, 4k and 16k
//      tokens (32 query and 8 KV heads of 128) against read bandwidth;
//   4. prefill tokens/s of one 2k-token prompt on each model.
// Prints a table and, with --json, one JSON object per figure. The same
// source also builds against the CUDA host emulation (gpu_bench_emulated),
// whose only use is to check, without a GPU, that every step of the
// benchmark runs: its timings mean nothing.
//
//   gpu_bench --model smollm2=/tmp/smollm2.gguf --model llama1b=/tmp/llama1b.gguf --json out.json
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/engine_bench.h"
#include "bench/gpu_bench_kernels.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/paged_attention.h"
#include "engine/engine.h"
#include "engine/executor/cuda/cuda_executor.h"

namespace kvfleet::bench {
namespace {

namespace cu = ::kvfleet::cuda;
namespace kc = ::kvfleet::kernels::cuda;
using Clock = std::chrono::steady_clock;

constexpr char kUsage[] = R"(usage: gpu_bench --model NAME=PATH [--model NAME=PATH ...] [--streams 1,8,64,256]
       [--prompt-tokens 32] [--gen-tokens 64] [--prefill-tokens 2048] [--contexts 1024,4096,16384]
       [--bandwidth-mib 4096] [--json FILE]
)";

class Report {
 public:
  void Add(const std::string& json) { lines_.push_back(json); }
  absl::Status Write(const std::string& path) const {
    if (path.empty()) return absl::OkStatus();
    std::ofstream f(path);
    f << "[\n";
    for (size_t i = 0; i < lines_.size(); ++i) f << "  " << lines_[i] << (i + 1 < lines_.size() ? ",\n" : "\n");
    f << "]\n";
    return f ? absl::OkStatus() : absl::InternalError(absl::StrCat(path, ": write failed"));
  }

 private:
  std::vector<std::string> lines_;
};

int64_t BlocksFor(int64_t tokens) { return (tokens + 15) / 16; }

// The CUDA executor on GPU 0 (on the emulated device in gpu_bench_emulated).
absl::StatusOr<std::unique_ptr<engine::ModelExecutor>> MakeGpuExecutor(const model::Model& model,
                                                                       int64_t num_blocks,
                                                                       const engine::ExecutorLimits& limits) {
  ASSIGN_OR_RETURN(std::unique_ptr<engine::CudaExecutor> ex,
                   engine::CudaExecutor::Create(model, {.device = {.kind = engine::DeviceKind::kCuda, .index = 0},
                                                        .num_blocks = num_blocks,
                                                        .block_size = 16,
                                                        .limits = limits}));
  return std::unique_ptr<engine::ModelExecutor>(std::move(ex));
}

absl::Status DecodeAndPrefill(const Flags& flags, const std::string& name, const std::string& path,
                              const MeasuredBandwidth& bw, Report& report) {
  ASSIGN_OR_RETURN(std::vector<int64_t> streams, flags.GetIntList("streams", "1,8,64,256"));
  ASSIGN_OR_RETURN(int64_t prompt, flags.GetInt("prompt-tokens", 32));
  ASSIGN_OR_RETURN(int64_t gen, flags.GetInt("gen-tokens", 64));
  ASSIGN_OR_RETURN(int64_t prefill, flags.GetInt("prefill-tokens", 2048));
  ASSIGN_OR_RETURN(auto model, LoadModel(path));
  const int64_t vocab = model->config().vocab_size;
  std::mt19937_64 rng(7);
  for (int64_t n : streams) {
    ASSIGN_OR_RETURN(auto ex, MakeGpuExecutor(*model, n * BlocksFor(prompt + gen) + 8,
                                              engine::EngineOptions::ExecutorLimitsFor(DecodeScheduler(n, prompt), 0)));
    RETURN_IF_ERROR(DecodeOnce(*ex, n, prompt, gen, rng, vocab).status());  // warm-up
    ASSIGN_OR_RETURN(DecodeRun run, DecodeOnce(*ex, n, prompt, gen, rng, vocab));
    // A step reads every weight once and each stream's KV so far.
    const double context = static_cast<double>(prompt) + static_cast<double>(gen) / 2;
    const double step_bytes = static_cast<double>(ex->memory().weight_bytes) +
                              static_cast<double>(n) * context * static_cast<double>(ex->info().kv_bytes_per_token);
    const double roofline = static_cast<double>(n) * bw.read_bytes_per_s / step_bytes;
    std::printf("%-10s decode %4lld streams: %10.1f tok/s, roofline %10.1f tok/s: %5.1f%% (%lld steps)\n",
                name.c_str(), static_cast<long long>(n), run.decode_tokens_per_s, roofline,
                100.0 * run.decode_tokens_per_s / roofline, static_cast<long long>(run.decode_steps));
    report.Add(absl::StrCat("{\"figure\": \"decode\", \"model\": \"", name, "\", \"streams\": ", n,
                            ", \"tokens_per_s\": ", run.decode_tokens_per_s, ", \"roofline_tokens_per_s\": ", roofline,
                            ", \"of_roofline\": ", run.decode_tokens_per_s / roofline, "}"));
  }
  ASSIGN_OR_RETURN(auto ex, MakeGpuExecutor(*model, BlocksFor(prefill + 2) + 8,
                                            engine::EngineOptions::ExecutorLimitsFor(DecodeScheduler(1, prefill), 0)));
  RETURN_IF_ERROR(DecodeOnce(*ex, 1, prefill, 2, rng, vocab).status());
  ASSIGN_OR_RETURN(DecodeRun run, DecodeOnce(*ex, 1, prefill, 2, rng, vocab));
  const double tokens_per_s = static_cast<double>(prefill) / run.prefill_s;
  std::printf("%-10s prefill of %lld tokens: %10.1f tok/s (%.1f ms)\n", name.c_str(), static_cast<long long>(prefill),
              tokens_per_s, 1e3 * run.prefill_s);
  report.Add(absl::StrCat("{\"figure\": \"prefill\", \"model\": \"", name, "\", \"tokens\": ", prefill,
                          ", \"tokens_per_s\": ", tokens_per_s, "}"));
  return absl::OkStatus();
}

// The attention kernels alone: 64 decode tokens, each at the end of a
// `context`-token sequence, over one layer's cache.
absl::Status AttentionBandwidth(int64_t context, const MeasuredBandwidth& bw, Report& report) {
  constexpr int64_t kSeqs = 64, kHeads = 32, kKvHeads = 8, kDim = 128, kBlock = 16;
  const int64_t blocks_per_seq = BlocksFor(context);
  const kernels::KvCacheLayout layout{kSeqs * blocks_per_seq, kKvHeads, kBlock, kDim};
  const size_t cache_bytes = static_cast<size_t>(layout.BytesPerLayer());
  ASSIGN_OR_RETURN(cu::DeviceBuffer k, cu::DeviceBuffer::Allocate(cache_bytes));
  ASSIGN_OR_RETURN(cu::DeviceBuffer v, cu::DeviceBuffer::Allocate(cache_bytes));
  RETURN_IF_ERROR(cu::Memset(k.get(), 0x31, cache_bytes, nullptr));  // small finite float16 values
  RETURN_IF_ERROR(cu::Memset(v.get(), 0x32, cache_bytes, nullptr));
  std::vector<int32_t> positions(kSeqs, static_cast<int32_t>(context - 1)), chunk_starts(kSeqs + 1), token_chunk(kSeqs);
  std::vector<int32_t> table(static_cast<size_t>(kSeqs * blocks_per_seq));
  std::vector<int64_t> slots(kSeqs);
  for (int64_t s = 0; s < kSeqs; ++s) {
    chunk_starts[s + 1] = static_cast<int32_t>(s + 1);
    token_chunk[s] = static_cast<int32_t>(s);
    for (int64_t b = 0; b < blocks_per_seq; ++b) table[s * blocks_per_seq + b] = static_cast<int32_t>(s * blocks_per_seq + b);
    slots[s] = (s * blocks_per_seq + (context - 1) / kBlock) * kBlock + (context - 1) % kBlock;
  }
  kc::AttentionPlan plan;
  const int64_t partials = kSeqs * kc::PartitionsFor(static_cast<int32_t>(context - 1));
  if (!kc::PlanAttention(positions.data(), chunk_starts.data(), kSeqs, kHeads / kKvHeads, partials, &plan)) {
    return absl::InternalError("the attention plan does not fit its workspace");
  }
  const auto upload = [](const auto& host) -> absl::StatusOr<cu::DeviceBuffer> {
    const size_t bytes = host.size() * sizeof(host[0]);
    ASSIGN_OR_RETURN(cu::DeviceBuffer b, cu::DeviceBuffer::Allocate(std::max<size_t>(bytes, 16)));
    RETURN_IF_ERROR(cu::CopyToDevice(b.get(), host.data(), bytes, nullptr));
    return b;
  };
  ASSIGN_OR_RETURN(cu::DeviceBuffer d_positions, upload(positions));
  ASSIGN_OR_RETURN(cu::DeviceBuffer d_chunks, upload(token_chunk));
  ASSIGN_OR_RETURN(cu::DeviceBuffer d_table, upload(table));
  ASSIGN_OR_RETURN(cu::DeviceBuffer d_slots, upload(slots));
  ASSIGN_OR_RETURN(cu::DeviceBuffer d_items, upload(plan.items));
  ASSIGN_OR_RETURN(cu::DeviceBuffer d_offsets, upload(plan.partial_offsets));
  std::vector<float> q(static_cast<size_t>(kSeqs * kHeads * kDim), 0.01f);
  ASSIGN_OR_RETURN(cu::DeviceBuffer d_q, upload(q));
  ASSIGN_OR_RETURN(cu::DeviceBuffer d_out, cu::DeviceBuffer::Allocate(q.size() * sizeof(float)));
  ASSIGN_OR_RETURN(cu::DeviceBuffer partial_o,
                   cu::DeviceBuffer::Allocate(static_cast<size_t>(partials * kHeads * kDim) * sizeof(float)));
  ASSIGN_OR_RETURN(cu::DeviceBuffer partial_ml,
                   cu::DeviceBuffer::Allocate(static_cast<size_t>(partials * kHeads * 2) * sizeof(float)));
  const kc::PagedAttentionParams p{
      .layout = layout,
      .where = {.positions = d_positions.as<int32_t>(),
                .token_chunk = d_chunks.as<int32_t>(),
                .block_table = d_table.as<int32_t>(),
                .table_width = blocks_per_seq,
                .kv_slots = d_slots.as<int64_t>()},
      .num_heads = kHeads,
      .scale = 1.0f / std::sqrt(static_cast<float>(kDim)),
      .q = d_q.as<float>(),
      .k_cache = k.as<uint8_t>(),
      .v_cache = v.as<uint8_t>(),
      .out = d_out.as<float>(),
      .items = d_items.as<kc::AttentionWorkItem>(),
      .partial_offsets = d_offsets.as<int64_t>(),
      .partial_o = partial_o.as<float>(),
      .partial_ml = partial_ml.as<float>()};
  std::vector<double> times;
  for (int r = 0; r < 11; ++r) {
    const Clock::time_point t0 = Clock::now();
    kc::LaunchPagedAttention(p, plan, nullptr);
    RETURN_IF_ERROR(cu::Synchronize(nullptr));
    RETURN_IF_ERROR(cu::CheckLaunches("the attention kernels"));
    if (r > 0) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  const double seconds = times[times.size() / 2];
  const double bytes = static_cast<double>(kSeqs * context * kKvHeads * kDim * 2 * sizeof(uint16_t));
  const double rate = bytes / seconds;
  std::printf("attention decode, 64 x %6lld tokens: %8.1f GB/s = %5.1f%% of read bandwidth (%.3f ms)\n",
              static_cast<long long>(context), rate / 1e9, 100.0 * rate / bw.read_bytes_per_s, 1e3 * seconds);
  report.Add(absl::StrCat("{\"figure\": \"attention_decode\", \"sequences\": 64, \"context\": ", context,
                          ", \"bytes_per_s\": ", rate, ", \"of_read_bandwidth\": ", rate / bw.read_bytes_per_s,
                          ", \"seconds\": ", seconds, "}"));
  return absl::OkStatus();
}

absl::Status Main(const Flags& flags) {
  std::string why;
  if (cu::DeviceCount(&why) == 0) return absl::FailedPreconditionError(absl::StrCat("gpu_bench needs a GPU: ", why));
  RETURN_IF_ERROR(cu::SetDevice(0));
  ASSIGN_OR_RETURN(cu::DeviceProperties props, cu::GetDeviceProperties(0));
  std::printf("# %s, sm_%d%d, %d multiprocessors, %.1f GiB\n", props.name.c_str(), props.major, props.minor,
              props.multiprocessors, static_cast<double>(props.total_memory) / (1 << 30));
  Report report;
  ASSIGN_OR_RETURN(int64_t mib, flags.GetInt("bandwidth-mib", 4096));
  ASSIGN_OR_RETURN(MeasuredBandwidth bw, MeasureBandwidth(static_cast<size_t>(mib) << 20, 10));
  std::printf("read bandwidth %.1f GB/s (read-only sum over %lld MiB); copy %.1f GB/s (read + written)\n",
              bw.read_bytes_per_s / 1e9, static_cast<long long>(mib), bw.copy_bytes_per_s / 1e9);
  report.Add(absl::StrCat("{\"figure\": \"bandwidth\", \"read_bytes_per_s\": ", bw.read_bytes_per_s,
                          ", \"copy_bytes_per_s\": ", bw.copy_bytes_per_s, "}"));
  ASSIGN_OR_RETURN(std::vector<int64_t> contexts, flags.GetIntList("contexts", "1024,4096,16384"));
  for (int64_t context : contexts) RETURN_IF_ERROR(AttentionBandwidth(context, bw, report));
  for (const std::string& spec : flags.GetStrings("model")) {
    const std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits('=', 1));
    if (parts.size() != 2) return absl::InvalidArgumentError(absl::StrCat("--model wants NAME=PATH, got ", spec));
    RETURN_IF_ERROR(DecodeAndPrefill(flags, parts[0], parts[1], bw, report));
  }
  return report.Write(flags.GetString("json", ""));
}

}  // namespace
}  // namespace kvfleet::bench

int main(int argc, char** argv) {
  kvfleet::InitLogging("warn");
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kvfleet::bench::kUsage, stdout);
    return 0;
  }
  absl::StatusOr<kvfleet::flags::Flags> flags = kvfleet::flags::Flags::Parse(
      args, {"model", "streams", "prompt-tokens", "gen-tokens", "prefill-tokens", "contexts", "bandwidth-mib", "json"},
      {});
  const absl::Status s = flags.ok() ? kvfleet::bench::Main(*flags) : flags.status();
  if (!s.ok()) {
    std::fprintf(stderr, "gpu_bench: %s\n%s", std::string(s.message()).c_str(), kvfleet::bench::kUsage);
    return 1;
  }
  return 0;
}
