// kvfleet: the command-line entry point. Wires subcommands; the work lives
// in the libraries.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/logging.h"
#include "services/transport/termination_signals.h"
#include "tools/kvfleet/commands.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  absl::Status (*run)(const kvfleet::tools::Args&);
};

constexpr Command kCommands[] = {
    {"up", "start a local cluster (cachemanager, workers, router) and serve until Ctrl-C", kvfleet::tools::RunUp},
    {"chat", "send a chat message through the router and stream the answer", kvfleet::tools::RunChat},
    {"generate", "continue a prompt through the router (--local: with a model on this CPU)",
     kvfleet::tools::RunGenerate},
    {"model-info", "show a model's hyperparameters, tensor types and KV cache cost", kvfleet::tools::RunModelInfo},
    {"capacity", "plan memory: weights, KV per token and conversation, blocks and conversations that fit",
     kvfleet::tools::RunCapacity},
    {"logits", "write the next-token logits after a prompt (float32 file)", kvfleet::tools::RunLogits},
    {"eval", "teacher-forced perplexity of a text, and KL divergence from a saved reference", kvfleet::tools::RunEval},
    {"tiny-model", "write a small random-weight GGUF for tests", kvfleet::tools::RunTinyModel},
    {"random-lora", "write a random-weight LoRA adapter (PEFT) for a model, for tests", kvfleet::tools::RunRandomLora},
    {"make-draft", "write a speculative-decoding draft: a model's first N layers, optionally requantized",
     kvfleet::tools::RunMakeDraft},
    {"dump-hidden", "answer prompts greedily and write the hidden states draft heads train on (tools/heads)",
     kvfleet::tools::RunDumpHidden},
    {"export-hf", "write a GGUF model as a Hugging Face checkpoint directory (safetensors, tokenizer.json)",
     kvfleet::tools::RunExportHf},
    {"bench-model", "measure prefill and decode tokens/s", kvfleet::tools::RunBenchModel},
    {"load", "drive a worker with concurrent streams; throughput and latency percentiles",
     kvfleet::tools::RunLoadClient},
    {"workers", "list the live workers the cachemanager knows, with their KV blocks and load",
     kvfleet::tools::RunWorkers},
    {"devices", "list the CPU, the GPUs and the NCCL a worker here could use", kvfleet::tools::RunDevices},
    {"models", "list the models a router serves; fails when none has a live worker", kvfleet::tools::RunModels},
};

void PrintUsage() {
  std::cerr << "usage: kvfleet <command> [flags]\n\ncommands:\n";
  for (const Command& c : kCommands) std::fprintf(stderr, "  %-12s %s\n", c.name, c.summary);
  std::cerr << "\nRun `kvfleet <command> --help` for a command's flags.\n";
}

}  // namespace

int main(int argc, char** argv) {
  // `up` waits for SIGINT/SIGTERM as values (TerminationSignals): they must
  // be blocked before any thread starts, so every thread inherits the mask.
  if (argc >= 2 && std::string(argv[1]) == "up") kvfleet::transport::TerminationSignals::Block();
  kvfleet::InitLogging(std::getenv("KVFLEET_LOG") ? std::getenv("KVFLEET_LOG") : "warn");
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "help") {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  const kvfleet::tools::Args args(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    const absl::Status status = c.run(args);
    if (!status.ok()) {
      std::cerr << "kvfleet " << name << ": " << status.message() << "\n";
      return 1;
    }
    return 0;
  }
  std::cerr << "kvfleet: unknown command '" << name << "'\n\n";
  PrintUsage();
  return 2;
}
