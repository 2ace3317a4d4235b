// kvfleet bench-model: prefill and decode throughput of one sequence.
#include <algorithm>
#include <cstdio>
#include <random>

#include "absl/strings/str_format.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "engine/executor/executor_factory.h"
#include "kernels/cpu/machine_ceilings.h"
#include "kernels/cpu/matmul_q8.h"
#include "tools/kvfleet/commands.h"
#include "tools/kvfleet/local_model.h"

namespace kvfleet::tools {

namespace {
constexpr char kUsage[] =
    R"(usage: kvfleet bench-model --model PATH [--device auto] [--threads N] [--prompt-tokens N] [--gen-tokens N]
       [--repeats N] [--cpu-activations f32|q8] [--kv-cache-dtype f16|int8|int8_rotated|int8_rotated_scaled|fp8_e4m3]
       [--q8-isa avx2|avx512-vnni] [--ceilings]

Runs a prompt of random tokens through prefill, then greedy decoding, and
prints one JSON line with the median tokens/s of each phase. --ceilings also
measures the machine in the same run (read bandwidth, float32 FMA and int8
dot throughput, on --threads threads) and adds the decode rates they allow
(the weights read once per token; two flops or one int8 multiply-add per
weight) and the measured decode as a share of the lower one. --q8-isa runs
8-bit activations (and the int8 ceiling) on that instruction set instead of
the best this CPU has, to measure the other set's kernels on one machine.
)";

// "" keeps the best set this CPU has.
absl::Status ForceQ8DotIsaFlag(const std::string& name) {
  if (name.empty()) return absl::OkStatus();
  for (kernels::Q8DotIsa isa : {kernels::Q8DotIsa::kAvx2, kernels::Q8DotIsa::kAvx512Vnni}) {
    if (name != kernels::Q8DotIsaName(isa)) continue;
    if (kernels::ForceQ8DotIsa(isa)) return absl::OkStatus();
    return absl::FailedPreconditionError("--q8-isa " + name + ": this CPU cannot run it");
  }
  return absl::InvalidArgumentError("--q8-isa takes avx2 or avx512-vnni, not \"" + name + "\"");
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

absl::Status RunBenchModel(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args,
                                             {"model", "device", "threads", "prompt-tokens", "gen-tokens", "repeats",
                                              "cpu-activations", "kv-cache-dtype", "q8-isa"},
                                             {"ceilings"}));
  ASSIGN_OR_RETURN(std::string path, flags.GetString("model"));
  ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0));
  ASSIGN_OR_RETURN(int64_t prompt_tokens, flags.GetInt("prompt-tokens", 128));
  ASSIGN_OR_RETURN(int64_t gen_tokens, flags.GetInt("gen-tokens", 64));
  ASSIGN_OR_RETURN(int64_t repeats, flags.GetInt("repeats", 3));
  if (prompt_tokens < 1 || gen_tokens < 2 || repeats < 1) {
    return absl::InvalidArgumentError("--prompt-tokens >= 1, --gen-tokens >= 2 and --repeats >= 1 are required");
  }
  ASSIGN_OR_RETURN(engine::Device device, engine::ResolveDevice(flags.GetString("device", "auto")));
  ASSIGN_OR_RETURN(engine::CpuActivations activations,
                   engine::ParseCpuActivations(flags.GetString("cpu-activations", "f32")));
  ASSIGN_OR_RETURN(kernels::KvCacheDtype kv_dtype, engine::ParseKvCacheDtype(flags.GetString("kv-cache-dtype", "f16")));
  RETURN_IF_ERROR(ForceQ8DotIsaFlag(flags.GetString("q8-isa", "")));
  ASSIGN_OR_RETURN(LocalModel m, LoadLocalModel(path, device, static_cast<int>(threads), prompt_tokens + gen_tokens,
                                                activations, kv_dtype));

  engine::EngineRequest request{.id = RequestId(1)};
  std::mt19937 rng(1234);
  for (int64_t i = 0; i < prompt_tokens; ++i) {
    request.prompt.push_back(static_cast<model::TokenId>(rng() % m.model->config().vocab_size));
  }
  request.sampling.temperature = 0.0f;
  request.stopping.max_tokens = static_cast<int32_t>(gen_tokens);
  request.stopping.ignore_eos = true;

  std::vector<double> prefill, decode;
  for (int64_t r = 0; r < repeats; ++r) {
    ASSIGN_OR_RETURN(OneRequestResult result,
                     RunOneRequest(m, request, {}, [](model::TokenId) { return absl::OkStatus(); }));
    prefill.push_back(static_cast<double>(prompt_tokens) / result.prefill_seconds);
    decode.push_back(static_cast<double>(gen_tokens - 1) / result.decode_seconds);
  }
  std::string ceilings;
  if (flags.GetSwitch("ceilings")) {
    ThreadPool pool(static_cast<int>(threads));
    const kernels::MachineCeilings c = kernels::MeasureMachineCeilings(pool);
    double weights = 0;  // multiply-adds per token: every matrix element once
    const model::DecoderWeights& w = m.model->weights();
    for (const model::LayerWeights& l : w.layers) {
      for (const model::WeightView* v : l.Matrices())
        weights += static_cast<double>(v->rows) * static_cast<double>(v->cols);
    }
    weights += static_cast<double>(w.output.rows) * static_cast<double>(w.output.cols);
    const double bytes = static_cast<double>(m.executor->info().weight_bytes);
    const double bandwidth_bound = c.read_bytes_per_s / bytes;
    const double compute_bound =
        activations == engine::CpuActivations::kQ8 ? c.int8_macs_per_s / weights : c.fma_flops_per_s / (2 * weights);
    ceilings = absl::StrFormat(
        ", \"read_gb_per_s\": %.2f, \"fma_gflops\": %.1f, \"fma_isa\": \"%s\", \"int8_gmacs\": %.1f, \"int8_isa\": "
        "\"%s\", "
        "\"weight_bytes_per_token\": %.0f, \"decode_bandwidth_bound\": %.1f, \"decode_compute_bound\": %.1f, "
        "\"decode_share_of_bound\": %.3f",
        c.read_bytes_per_s / 1e9, c.fma_flops_per_s / 1e9, c.fma_isa, c.int8_macs_per_s / 1e9, c.int8_isa, bytes,
        bandwidth_bound, compute_bound, Median(decode) / std::min(bandwidth_bound, compute_bound));
  }
  std::printf(
      "{\"threads\": %lld, \"prompt_tokens\": %lld, \"gen_tokens\": %lld, \"cpu_activations\": \"%s\", "
      "\"kv_cache_dtype\": \"%s\", \"kv_bytes_per_token\": %lld, \"prefill_tokens_per_s\": %.2f, "
      "\"decode_tokens_per_s\": %.2f%s}\n",
      static_cast<long long>(threads), static_cast<long long>(prompt_tokens), static_cast<long long>(gen_tokens),
      std::string(engine::CpuActivationsName(activations)).c_str(),
      std::string(kernels::KvCacheDtypeName(kv_dtype)).c_str(),
      static_cast<long long>(m.executor->info().kv_bytes_per_token), Median(prefill), Median(decode), ceilings.c_str());
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
