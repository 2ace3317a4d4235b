// kvfleet generate: one prompt through the router (default), or with
// --local one prompt or chat turn through the model on this machine (GPU or CPU);
// streamed to stdout as it is generated either way.
#include <cstdio>
#include <initializer_list>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "engine/calibration/mode_choice.h"
#include "engine/executor/executor_factory.h"
#include "engine/request/request.h"
#include "model/tokenizer/chat_encoding.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/incremental_detokenizer.h"
#include "model/tokenizer/tokenizer.h"
#include "tools/kvfleet/commands.h"
#include "tools/kvfleet/local_model.h"
#include "tools/kvfleet/router_client.h"

namespace kvfleet::tools {

namespace {
constexpr char kUsage[] =
    R"(usage: kvfleet generate (--prompt TEXT | --prompt-token-ids 1,2,3) [--router HOST:PORT [--tls-ca PEM]]
                        [--model-name NAME] [--stop TEXT]... [--cache-salt S] [--speculation P] [--timeout SECONDS] [sampling flags]
       kvfleet generate --local [--model PATH] (--chat TEXT | --prompt TEXT | --prompt-token-ids 1,2,3)
                        [--system TEXT] [--device auto|cpu|cuda[:N]] [--threads N] [--cpu-activations f32|q8]
                        [--kv-cache-dtype f16|int8|int8_rotated|fp8_e4m3] [--tensor-parallel N]
                        [--lora DIR] [sampling flags]

sampling flags: [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p P]
                [--repetition-penalty R] [--presence-penalty P] [--frequency-penalty F]
                [--seed N] [--stop-token-ids 1,2] [--ignore-eos] [--output text|ids]

Without --local the prompt goes to the router's Generate (--router, default
127.0.0.1:50060; start a cluster with `kvfleet up`); --model-name names the
model when the router serves several (`kvfleet models` lists them). --stop ends generation
at a string (repeat it for several; the string itself is not printed);
--cache-salt keeps this caller's cached prefixes apart from others';
--speculation picks the worker's speculative proposer for this request
(ngram, suffix, self, draft, heads, auto; off to opt out; the text is the same either way);
--timeout bounds the whole call. To chat through the router use `kvfleet chat`.

--local runs the model in this process instead: --chat sends TEXT as a user
message through the model's chat template (with --system as the system
message); --prompt continues raw text. --model defaults to
models/SmolLM2-135M-Instruct.Q4_1.gguf; --device auto (the default) takes
GPU 0 when one is usable, else the CPU, and says which. --tensor-parallel N
(or --tensor-parallel-size) splits the model across N ranks, which the CPU
runs in turn: the same tokens at a given N, close ones across Ns. --lora DIR
runs under the LoRA adapter in DIR (PEFT's format): the tokens a worker gives
a request under it.
With --model-name naming a LoRA adapter, the router runs the request under it.

Text streams to stdout as it is generated; a summary goes to stderr.
--output ids prints the generated token ids as one comma-separated line
instead. Decoding is greedy unless --temperature is set; --max-tokens
defaults to 256.
)";

constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

absl::Status ReadSampling(const Flags& f, engine::SamplingParams& s, engine::StoppingParams& stop) {
  ASSIGN_OR_RETURN(double temperature, f.GetDouble("temperature", 0.0));
  ASSIGN_OR_RETURN(int64_t top_k, f.GetInt("top-k", 0));
  ASSIGN_OR_RETURN(double top_p, f.GetDouble("top-p", 1.0));
  ASSIGN_OR_RETURN(double min_p, f.GetDouble("min-p", 0.0));
  ASSIGN_OR_RETURN(double rep, f.GetDouble("repetition-penalty", 1.0));
  ASSIGN_OR_RETURN(double presence, f.GetDouble("presence-penalty", 0.0));
  ASSIGN_OR_RETURN(double frequency, f.GetDouble("frequency-penalty", 0.0));
  ASSIGN_OR_RETURN(int64_t max_tokens, f.GetInt("max-tokens", 256));
  ASSIGN_OR_RETURN(stop.stop_token_ids, f.GetTokenIds("stop-token-ids"));
  s.temperature = static_cast<float>(temperature);
  s.top_k = static_cast<int32_t>(top_k);
  s.top_p = static_cast<float>(top_p);
  s.min_p = static_cast<float>(min_p);
  s.repetition_penalty = static_cast<float>(rep);
  s.presence_penalty = static_cast<float>(presence);
  s.frequency_penalty = static_cast<float>(frequency);
  if (f.Has("seed")) {
    ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 0));
    s.seed = static_cast<uint64_t>(seed);
  }
  stop.max_tokens = static_cast<int32_t>(std::min<int64_t>(max_tokens, 1 << 30));
  stop.ignore_eos = f.GetSwitch("ignore-eos");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<model::TokenId>> BuildPrompt(const Flags& f, const model::Tokenizer& tok,
                                                        const model::Vocabulary& vocab) {
  const int sources = f.Has("chat") + f.Has("prompt") + f.Has("prompt-token-ids");
  if (sources != 1) {
    return absl::InvalidArgumentError("give exactly one of --chat, --prompt or --prompt-token-ids");
  }
  if (f.Has("prompt-token-ids")) return f.GetTokenIds("prompt-token-ids");
  if (f.Has("prompt")) {
    return tok.Encode(f.GetString("prompt", ""), {.add_special = true, .parse_special = false});
  }
  ASSIGN_OR_RETURN(model::ChatTemplate tmpl, model::ChatTemplate::FromVocabulary(vocab));
  std::vector<model::ChatMessage> messages;
  if (f.Has("system")) messages.push_back({.role = "system", .content = f.GetString("system", "")});
  messages.push_back({.role = "user", .content = f.GetString("chat", "")});
  return model::EncodeChat(tok, tmpl, vocab.add_bos, messages, /*add_generation_prompt=*/true);
}

// Fails naming the first of `names` that is set: they belong to the other mode.
absl::Status RejectFlags(const Flags& flags, std::initializer_list<const char*> names, const char* why) {
  for (const char* name : names) {
    if (flags.Has(name)) return absl::InvalidArgumentError(absl::StrCat("--", name, " ", why));
  }
  return absl::OkStatus();
}

absl::Status RunThroughRouter(const Flags& flags) {
  RETURN_IF_ERROR(RejectFlags(flags,
                              {"model", "threads", "device", "cpu-activations", "kv-cache-dtype", "tensor-parallel",
                               "tensor-parallel-size", "lora"},
                              "needs --local (the router serves its own model)"));
  RETURN_IF_ERROR(
      RejectFlags(flags, {"chat", "system"}, "needs --local; to chat through the router use `kvfleet chat`"));
  ASSIGN_OR_RETURN(CallSettings call, CallSettingsFromFlags(flags));
  ASSIGN_OR_RETURN(v1::GenerateTextRequest request, GenerateRequestFromFlags(flags));
  return StreamGenerate(call, request, stdout, stderr);
}

absl::Status RunLocally(const Flags& flags) {
  RETURN_IF_ERROR(RejectFlags(flags, {"router", "model-name", "stop", "cache-salt", "timeout"},
                              "applies only through the router (drop --local)"));
  const std::string output = flags.GetString("output", "text");
  if (output != "text" && output != "ids") {
    return absl::InvalidArgumentError(absl::StrCat("--output must be text or ids, got '", output, "'"));
  }
  engine::EngineRequest request{.id = RequestId(1)};
  RETURN_IF_ERROR(ReadSampling(flags, request.sampling, request.stopping));
  // Drawn here rather than in the engine so the summary can print it.
  const uint64_t seed = request.sampling.seed.value_or(std::random_device{}());
  request.sampling.seed = seed;
  ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0));
  ASSIGN_OR_RETURN(int64_t tensor_parallel, flags.GetIntOrAlias("tensor-parallel", "tensor-parallel-size", 1));

  const std::string path = flags.GetString("model", kDefaultModel);
  LocalModel m;
  ASSIGN_OR_RETURN(m.model, model::Model::Load(path));
  // One adapter, in the one slot: what a worker computes for a request under it.
  ASSIGN_OR_RETURN(request.lora, ReadLocalLora(flags, *m.model));
  ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tok, model::CreateTokenizer(m.model->vocabulary()));
  ASSIGN_OR_RETURN(request.prompt, BuildPrompt(flags, *tok, m.model->vocabulary()));
  const std::span<const model::TokenId> stops = tok->StopTokens();
  // Sized for this request; one that exceeds the context is rejected by the
  // engine with both numbers.
  ASSIGN_OR_RETURN(engine::Device device, engine::ResolveDevice(flags.GetString("device", "auto")));
  ASSIGN_OR_RETURN(engine::CpuActivations activations,
                   engine::ParseCpuActivations(flags.GetString("cpu-activations", "f32")));
  ASSIGN_OR_RETURN(kernels::KvCacheDtype kv_dtype, engine::ParseKvCacheDtype(flags.GetString("kv-cache-dtype", "f16")));
  ASSIGN_OR_RETURN(
      std::shared_ptr<const engine::KeyChannelScales> scales,
      engine::KeyScalesForModes(*m.model, engine::CalibrationPathFor(path), false, device.kind, activations, kv_dtype));
  ASSIGN_OR_RETURN(m.executor,
                   CreateLocalExecutor(*m.model, device, static_cast<int>(threads),
                                       static_cast<int64_t>(request.prompt.size()) + request.stopping.max_tokens,
                                       activations, kv_dtype, std::move(scales), static_cast<int32_t>(tensor_parallel),
                                       LocalLoraLimits(request.lora.get())));

  model::IncrementalDetokenizer detok(*tok, {.skip_special = true});
  auto on_token = [&](model::TokenId id) -> absl::Status {
    if (output != "text") return absl::OkStatus();
    ASSIGN_OR_RETURN(std::string delta, detok.Push(id));
    std::fwrite(delta.data(), 1, delta.size(), stdout);
    std::fflush(stdout);
    return absl::OkStatus();
  };
  const size_t prompt_tokens = request.prompt.size();
  ASSIGN_OR_RETURN(
      OneRequestResult result,
      RunOneRequest(m, std::move(request), std::vector<model::TokenId>(stops.begin(), stops.end()), on_token));
  if (output == "text") {
    const std::string rest = detok.Finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::printf("\n");
  } else {
    std::printf("%s\n", absl::StrJoin(result.tokens, ",").c_str());
  }
  std::fflush(stdout);  // the text before the summary on a shared terminal
  const double decode_rate =
      result.tokens.size() > 1 ? (result.tokens.size() - 1) / std::max(result.decode_seconds, 1e-9) : 0.0;
  std::fprintf(
      stderr, "[%zu prompt tokens, %zu generated, finish: %s, seed %llu; prefill %.1f tok/s, decode %.1f tok/s]\n",
      prompt_tokens, result.tokens.size(), engine::FinishReasonName(result.finish_reason),
      static_cast<unsigned long long>(seed), prompt_tokens / std::max(result.prefill_seconds, 1e-9), decode_rate);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunGenerate(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args,
                                             WithRouterFlags({"model", "chat", "system", "prompt", "prompt-token-ids",
                                                              "threads", "device", "cpu-activations", "kv-cache-dtype",
                                                              "tensor-parallel", "tensor-parallel-size", "lora"}),
                                             {"ignore-eos", "local"}));
  return flags.GetSwitch("local") ? RunLocally(flags) : RunThroughRouter(flags);
}

}  // namespace kvfleet::tools
