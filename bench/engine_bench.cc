// engine_bench: benchmarks of the engine against baselines measured in the
// same run. See engine_bench.h for what each subcommand does and
// bench/README.md for how to read the output.
#include "bench/engine_bench.h"

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/logging.h"

namespace {

constexpr char kUsage[] = R"(usage: engine_bench SUBCOMMAND [--flag value ...]

Model-free simulations (the real scheduler, KV cache manager and block pool):
  kv-waste             KV slots allocated but unfilled: paged blocks vs a
                       contiguous max_model_len reservation per request
                       [--requests 2000 --seed 1 --budget-mib 1024 --max-model-len 2048
                        --prompt-median 200 --prompt-sigma 1 --output-median 100
                        --output-sigma 1 --max-num-seqs 256 --max-num-batched-tokens 2048]
  concurrency          requests running at once in a fixed KV budget, same trace
                       [same flags; --budget-mib 64,1024]

On the default model (the executor of --device auto|cpu|cuda[:N], default auto):
  continuous-vs-static continuous vs static batching, same requests
                       [--requests 24 --prompt-min 16 --prompt-max 128 --output-min 8
                        --output-max 96 --max-num-seqs 8 --arrival-rate 0 --repeats 1
                        --threads 2 --seed 1]
  shared-prefix        prefix caching on vs off, requests sharing a prefix
                       [--requests 32 --prefix 512 --suffix 16 --output 16
                        --max-num-batched-tokens 512 --threads 2 --seed 1]
  aggregate-decode     aggregate decode tokens/s for N streams (one JSON line per N;
                       bench/engine_vs_llamacpp.py compares it with llama.cpp)
                       [--streams 1,4,8,16,32 --prompt-tokens 32 --gen-tokens 32
                        --repeats 3 --threads 2 --seed 1 --isa best|avx2 (AVX2
                        kernels on an AVX-512 machine)]
  lora-decode          aggregate decode of N streams spread over A LoRA adapters and the
                       base model, against N base-only streams (alternated, same run);
                       also each adapter's read, slot load and unload times
                       [--streams 16 --adapters 8 --rank 8 --targets q_proj,k_proj,v_proj,o_proj
                        --prompt-tokens 32 --gen-tokens 32 --repeats 5 --threads 2 --seed 1]
Every model subcommand takes --model PATH (default: the project's default model),
--device (default auto: GPU 0 when one is usable, else the CPU) and
--cpu-activations f32|q8 (default f32) and --kv-cache-dtype f16|int8|int8_rotated|int8_rotated_scaled|fp8_e4m3
(default f16).
)";

}  // namespace

int main(int argc, char** argv) {
  using kvfleet::flags::Flags;
  kvfleet::InitLogging("warn");
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  // The flags each subcommand accepts; anything else is an error.
  const std::set<std::string> sim = {
      "requests",      "seed",         "max-model-len", "prompt-median",          "prompt-sigma",
      "output-median", "output-sigma", "max-num-seqs",  "max-num-batched-tokens", "budget-mib"};
  const std::map<std::string, std::set<std::string>> accepted = {
      {"kv-waste", sim},
      {"concurrency", sim},
      {"continuous-vs-static",
       {"model", "device", "cpu-activations", "kv-cache-dtype", "threads", "requests", "prompt-min", "prompt-max",
        "output-min", "output-max", "max-num-seqs", "repeats", "arrival-rate", "seed"}},
      {"shared-prefix",
       {"model", "device", "cpu-activations", "kv-cache-dtype", "threads", "requests", "prefix", "suffix", "output",
        "max-num-batched-tokens", "seed"}},
      {"aggregate-decode",
       {"model", "device", "cpu-activations", "kv-cache-dtype", "threads", "streams", "prompt-tokens", "gen-tokens",
        "repeats", "seed", "isa"}},
      {"lora-decode",
       {"model", "device", "cpu-activations", "kv-cache-dtype", "threads", "streams", "adapters", "rank", "targets",
        "prompt-tokens", "gen-tokens", "repeats", "seed"}},
  };
  const auto known = accepted.find(command);
  if (known == accepted.end()) {
    std::fprintf(stderr, "engine_bench: unknown subcommand '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
  }
  absl::StatusOr<Flags> flags = Flags::Parse(std::vector<std::string>(argv + 2, argv + argc), known->second, {});
  if (!flags.ok()) {
    std::fprintf(stderr, "engine_bench %s: %s\n", command.c_str(), flags.status().ToString().c_str());
    return 2;
  }
  absl::Status status;
  if (command == "kv-waste") {
    status = kvfleet::bench::RunKvWaste(*flags);
  } else if (command == "concurrency") {
    status = kvfleet::bench::RunConcurrency(*flags);
  } else if (command == "continuous-vs-static") {
    status = kvfleet::bench::RunContinuousVsStatic(*flags);
  } else if (command == "shared-prefix") {
    status = kvfleet::bench::RunSharedPrefix(*flags);
  } else if (command == "aggregate-decode") {
    status = kvfleet::bench::RunAggregateDecode(*flags);
  } else if (command == "lora-decode") {
    status = kvfleet::bench::RunLoraDecode(*flags);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "engine_bench %s: %s\n", command.c_str(), status.ToString().c_str());
    return 1;
  }
  return 0;
}
