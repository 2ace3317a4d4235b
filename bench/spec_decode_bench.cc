// spec_decode_bench: speculative decoding on the default model, against
// plain decoding measured in the same run.
//
// For each workload (structured: extraction, code, editing, reformatting;
// code: work on a given function; chat: open-ended) and each load (concurrent streams), it runs the same
// greedy chat requests through a fresh engine per configuration — plain
// decoding (twice: before and after the others, to show the drift), and
// each proposer with the adaptive draft length the worker uses by default
// — and prints the wall time per generated token, its ratio against plain,
// and the acceptance. Every configuration's tokens are checked against
// plain's: speculation may change the speed, never the output.
//
// The draft model, unless --draft-model names one, is the target
// requantized to Q4_0 by kvfleet's make-draft (same layers, fewer bits per
// weight): as a draft on a CPU it costs about as much as the target.
//
// Not run in CI; see bench/README.md for results.
//
//   spec_decode_bench --streams 1,8,32 --max-tokens 128
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/spec_decode_bench_workloads.h"
#include "common/byte_size.h"
#include "common/flags/flags.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "engine/executor/executor_factory.h"
#include "engine/spec/proposer_set.h"
#include "engine/spec/suffix_proposer.h"
#include "model/model.h"
#include "model/tokenizer/chat_encoding.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "tools/draft_model/make_draft.h"

namespace kvfleet::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Every run's engine; the executor is sized for it.
// The lookup replay learns and drafts as one tenant, as a single-tenant worker does.
const BlockHash kTenant = RootBlockHash("spec_decode_bench", "");
constexpr engine::SchedulerConfig kScheduler{.max_num_batched_tokens = 512, .max_num_seqs = 64};

constexpr char kUsage[] = R"(usage: spec_decode_bench [--model PATH] [--device auto] [--cpu-activations f32|q8]
       [--threads 2] [--streams 1,8,32]
       [--max-tokens 128] [--self-layers 20] [--draft-model PATH] [--max-draft-tokens 8]
       [--workloads structured,code,chat] [--configs ngram,suffix,self,draft,ngram-fixed] [--ngram-min 2 --ngram-max 4]
       [--suffix-factor 2 --suffix-min-prob 0.1 --suffix-store 64MiB] [--replay FILE]
       [--draft-heads DIR (loads the "heads" config)] [--heads-top-k K (> 1: the heads draft trees)]
       [--repeats 1]

Wall time per generated token with and without speculative decoding, and
acceptance per proposer, on structured and chat workloads at each load.
"ngram-fixed" (any "<proposer>-fixed") drafts with adaptivity off (always max-draft-tokens),
to show what adaptivity prevents under load. --replay FILE instead replays
plain decoding's outputs through the lookup proposers (ngram, suffix) at a
fixed draft length and appends one JSON line per simulated verify pass.
)";

struct Config {
  std::string name;      // as printed
  std::string proposer;  // engine proposer, or "off"
  bool adaptive = true;
};

// Times a request's decoding: from its first token (the end of its
// prefill, which speculation does not touch) to its last.
class TimingSink : public engine::OutputSink {
 public:
  void OnOutput(engine::RequestOutput out) override {
    const Clock::time_point now = Clock::now();
    if (tokens.empty() && !out.new_tokens.empty()) first = now;
    tokens.insert(tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    if (out.finished) last = now;
  }
  std::vector<model::TokenId> tokens;
  Clock::time_point first, last;
};

struct Measurement {
  double decode_seconds = 0;  // summed over requests: first token to last
  int64_t decode_tokens = 0;  // tokens after each request's first
  double wall_seconds = 0;    // submission of the first request to the end of the last
  int64_t tokens = 0;
  std::vector<std::vector<model::TokenId>> outputs;
  engine::SpeculationStats spec;  // of the configuration's proposer
  // Inter-token time: what a stream's reader waits per token once it flows.
  double per_token() const { return decode_tokens > 0 ? decode_seconds / static_cast<double>(decode_tokens) : 0.0; }
  // Wall time per generated token, prefill included: throughput's inverse.
  double wall_per_token() const { return tokens > 0 ? wall_seconds / static_cast<double>(tokens) : 0.0; }
};

struct Setup {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<engine::ModelExecutor> executor;
  std::unique_ptr<engine::spec::ProposerSet> proposers;
  // Each run gets a fresh suffix proposer, so its store of finished outputs
  // holds only that run's: no configuration learns from another's text.
  engine::spec::SuffixProposerOptions suffix;
  std::unique_ptr<engine::spec::SuffixProposer> fresh_suffix;
  std::vector<model::TokenId> end_of_turn;
  int32_t max_draft_tokens = 8;
};

// Runs `prompts` (all submitted at once) to completion; `streams` of them
// at a time when the scheduler allows.
absl::StatusOr<Measurement> RunOnce(Setup& s, const Config& config, const std::vector<std::vector<int32_t>>& prompts,
                                    int32_t max_tokens) {
  engine::EngineOptions options{.model_id = "bench",
                                .scheduler = kScheduler,
                                .end_of_turn_tokens = s.end_of_turn};
  for (engine::spec::Proposer* p : s.proposers->pointers()) {
    if (p->name() != "suffix") options.proposers.push_back(p);
  }
  options.proposers.push_back(s.fresh_suffix.get());
  options.speculation = {.proposer = config.proposer,
                         .max_draft_tokens = s.max_draft_tokens,
                         .adaptive = config.adaptive};
  RETURN_IF_ERROR(options.Validate());
  engine::Engine engine(*s.executor, options);
  std::vector<TimingSink> sinks(prompts.size());
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::EngineRequest r{.id = RequestId(i + 1), .prompt = prompts[i]};
    r.sampling.temperature = 0.0f;
    r.stopping.max_tokens = max_tokens;
    RETURN_IF_ERROR(engine.Submit(std::move(r), &sinks[i]));
  }
  while (engine.HasWork()) RETURN_IF_ERROR(engine.Step());
  Measurement m;
  m.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (TimingSink& sink : sinks) {
    m.tokens += static_cast<int64_t>(sink.tokens.size());
    m.decode_tokens += static_cast<int64_t>(sink.tokens.size()) - 1;
    m.decode_seconds += std::chrono::duration<double>(sink.last - sink.first).count();
    m.outputs.push_back(std::move(sink.tokens));
  }
  for (const engine::SpeculationStats& p : engine.Stats().speculation) {
    if (p.proposer == config.proposer) m.spec = p;
    if (config.proposer == engine::spec::kProposerAuto) {  // whichever it picked
      m.spec.drafted_tokens += p.drafted_tokens;
      m.spec.accepted_tokens += p.accepted_tokens;
      m.spec.verify_passes += p.verify_passes;
    }
  }
  return m;
}

// At batch 1 the prompts run one after another; at batch n, n requests
// (the prompts repeated) run together.
absl::StatusOr<Measurement> Run(Setup& s, const Config& config, const std::vector<std::vector<int32_t>>& prompts,
                                int streams, int32_t max_tokens) {
  s.fresh_suffix = std::make_unique<engine::spec::SuffixProposer>(s.suffix);
  if (streams > 1) {
    std::vector<std::vector<int32_t>> batch;
    for (int i = 0; i < streams; ++i) batch.push_back(prompts[i % prompts.size()]);
    return RunOnce(s, config, batch, max_tokens);
  }
  Measurement total;
  for (const auto& p : prompts) {
    ASSIGN_OR_RETURN(Measurement one, RunOnce(s, config, {p}, max_tokens));
    total.decode_seconds += one.decode_seconds;
    total.decode_tokens += one.decode_tokens;
    total.wall_seconds += one.wall_seconds;
    total.tokens += one.tokens;
    total.outputs.push_back(std::move(one.outputs[0]));
    total.spec.drafted_tokens += one.spec.drafted_tokens;
    total.spec.accepted_tokens += one.spec.accepted_tokens;
    total.spec.verify_passes += one.spec.verify_passes;
  }
  return total;
}

// --replay: plain decoding's greedy outputs replayed through the lookup
// proposers offline. Each verify pass is simulated as the engine would run
// it (the context up to the pending token, a draft of max_draft_tokens,
// accepted up to the first wrong guess, one more token from the target),
// so acceptance can be studied per match length without the model's cost.
// One JSON line per pass.
absl::Status Replay(Setup& s, const std::vector<std::vector<int32_t>>& prompts, const std::string& workload,
                    int32_t max_tokens, const engine::spec::NgramProposerOptions& ngram_options, std::FILE* out) {
  ASSIGN_OR_RETURN(Measurement plain, Run(s, {"off", "off"}, prompts, 1, max_tokens));
  engine::spec::NgramProposer ngram(ngram_options);
  engine::spec::SuffixProposer suffix(s.suffix);
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<model::TokenId>& output = plain.outputs[p];
    if (output.empty()) continue;
    for (const std::string name : {"ngram", "suffix"}) {
      std::vector<model::TokenId> context(prompts[p].begin(), prompts[p].end());
      size_t pos = 1;  // the first token comes from the prefill
      context.push_back(output[0]);
      while (pos < output.size()) {
        std::vector<model::TokenId> draft;
        engine::spec::SuffixProposer::Explained why;
        if (name == "ngram") {
          ngram.ProposeFor(context, s.max_draft_tokens, &draft);
        } else {
          suffix.ProposeFor(kTenant, context, s.max_draft_tokens, &draft, &why);
        }
        size_t accepted = 0;
        while (accepted < draft.size() && pos + accepted < output.size() && draft[accepted] == output[pos + accepted]) {
          ++accepted;
        }
        std::string probability;
        for (double q : why.probability) probability += (probability.empty() ? "" : ",") + std::to_string(q);
        std::fprintf(out,
                     "{\"workload\":\"%s\",\"prompt\":%zu,\"proposer\":\"%s\",\"pos\":%zu,\"drafted\":%zu,"
                     "\"accepted\":%zu,\"match\":%d,\"store\":%s,\"probability\":[%s]}\n",
                     workload.c_str(), p, name.c_str(), pos, draft.size(), accepted, why.match_length,
                     why.from_store ? "true" : "false", probability.c_str());
        const size_t step = std::min(accepted + 1, output.size() - pos);
        context.insert(context.end(), output.begin() + static_cast<int64_t>(pos),
                       output.begin() + static_cast<int64_t>(pos + step));
        pos += step;
      }
    }
    suffix.Learn(kTenant, output);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ParseInts(const std::string& csv) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(csv, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError("--streams takes positive integers separated by commas");
    }
    out.push_back(v);
  }
  return out;
}

absl::Status Main(const flags::Flags& f) {
  ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 2));
  ASSIGN_OR_RETURN(int64_t max_tokens, f.GetInt("max-tokens", 128));
  ASSIGN_OR_RETURN(int64_t self_layers, f.GetInt("self-layers", 20));
  ASSIGN_OR_RETURN(int64_t max_draft, f.GetInt("max-draft-tokens", 8));
  ASSIGN_OR_RETURN(int64_t repeats, f.GetInt("repeats", 1));
  if (repeats < 1) return absl::InvalidArgumentError("--repeats must be >= 1");
  ASSIGN_OR_RETURN(int64_t ngram_min, f.GetInt("ngram-min", 2));
  ASSIGN_OR_RETURN(int64_t ngram_max, f.GetInt("ngram-max", 4));
  engine::spec::SuffixProposerOptions suffix;
  ASSIGN_OR_RETURN(suffix.max_spec_factor, f.GetDouble("suffix-factor", suffix.max_spec_factor));
  ASSIGN_OR_RETURN(suffix.min_token_prob, f.GetDouble("suffix-min-prob", suffix.min_token_prob));
  if (f.Has("suffix-store")) {
    ASSIGN_OR_RETURN(suffix.store_bytes, ParseByteSize(f.GetString("suffix-store", "")));
  }
  RETURN_IF_ERROR(suffix.Validate());
  ASSIGN_OR_RETURN(std::vector<int> streams, ParseInts(f.GetString("streams", "1,8,32")));
  const std::string model_path = f.GetString("model", KVFLEET_DEFAULT_MODEL_PATH);
  std::vector<std::string> wanted_workloads = absl::StrSplit(f.GetString("workloads", "structured,code,chat"), ',');
  std::vector<std::string> config_names =
      absl::StrSplit(f.GetString("configs", "ngram,suffix,self,draft,ngram-fixed"), ',');

  const std::string heads_path = f.GetString("draft-heads", "");
  ASSIGN_OR_RETURN(int64_t heads_top_k, f.GetInt("heads-top-k", 1));
  std::string draft_path = f.GetString("draft-model", "");
  if (draft_path.empty()) {
    draft_path = (std::filesystem::temp_directory_path() / "spec_decode_bench_draft_q4_0.gguf").string();
    RETURN_IF_ERROR(tools::MakeDraftModel(model_path, draft_path, {.weight_type = DType::kQ4_0}));
  }

  Setup s;
  s.max_draft_tokens = static_cast<int32_t>(max_draft);
  s.suffix = suffix;
  ASSIGN_OR_RETURN(s.model, model::Model::Load(model_path));
  ASSIGN_OR_RETURN(engine::Device device, engine::ResolveDevice(f.GetString("device", "auto")));
  ASSIGN_OR_RETURN(engine::CpuActivations activations,
                   engine::ParseCpuActivations(f.GetString("cpu-activations", "f32")));
  ASSIGN_OR_RETURN(s.executor,
                   engine::CreateExecutor(*s.model, {.device = device,
                                                     .num_blocks = 1024,
                                                     .block_size = 16,
                                                     .num_threads = static_cast<int>(threads),
                                                     .cpu_activations = activations,
                                                     .limits = engine::EngineOptions::ExecutorLimitsFor(
                                                         kScheduler, s.max_draft_tokens)}));
  ASSIGN_OR_RETURN(engine::spec::ProposerSet set,
                   engine::spec::ProposerSet::Load(
                       {.ngram = {.min_n = static_cast<int32_t>(ngram_min), .max_n = static_cast<int32_t>(ngram_max)},
                        .self_layers = static_cast<int32_t>(self_layers),
                        .draft_model_path = draft_path,
                        .draft_heads_path = heads_path,
                        .heads_top_k = static_cast<int32_t>(heads_top_k),
                        .num_threads = static_cast<int>(threads),
                        .cpu_activations = activations},
                       *s.executor, {*s.model, model_path}, engine::CreateExecutor));
  s.proposers = std::make_unique<engine::spec::ProposerSet>(std::move(set));
  ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tok, model::CreateTokenizer(s.model->vocabulary()));
  s.end_of_turn.assign(tok->StopTokens().begin(), tok->StopTokens().end());
  ASSIGN_OR_RETURN(model::ChatTemplate chat, model::ChatTemplate::FromVocabulary(s.model->vocabulary()));

  std::vector<Config> configs;
  for (const std::string& name : config_names) {
    // "<proposer>-fixed": that proposer with adaptivity off (always k).
    if (name.size() > 6 && name.substr(name.size() - 6) == "-fixed") {
      configs.push_back({name, name.substr(0, name.size() - 6), false});
    } else {
      configs.push_back({name, name, true});
    }
  }
  std::printf(
      "spec_decode_bench: %s, %lld threads, greedy, max_tokens %lld, k <= %lld, self layers %lld, draft %s, heads "
      "top-k %lld\n",
      model_path.c_str(), static_cast<long long>(threads), static_cast<long long>(max_tokens),
      static_cast<long long>(max_draft), static_cast<long long>(self_layers), draft_path.c_str(),
      static_cast<long long>(heads_top_k));
  std::printf("ms/token: decode phase, per stream (first token to last); speedup: plain's over this;\n"
              "wall: wall time per generated token with prefill (throughput), and its speedup\n");
  std::printf("%-10s %7s %-12s %7s %9s %8s %8s %9s %9s %8s %5s\n", "workload", "streams", "config", "tokens",
              "ms/token", "speedup", "accept", "acc/pass", "wall ms", "wall x", "same");
  for (const SpecWorkload& w : SpecWorkloads()) {
    if (std::find(wanted_workloads.begin(), wanted_workloads.end(), w.name) == wanted_workloads.end()) continue;
    std::vector<std::vector<int32_t>> prompts;
    for (const std::string& p : w.prompts) {
      const model::ChatMessage message{.role = "user", .content = p};
      ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                       model::EncodeChat(*tok, chat, s.model->vocabulary().add_bos, {&message, 1}, /*add_generation_prompt=*/true));
      prompts.push_back(std::move(ids));
    }
    if (f.Has("replay")) {
      std::FILE* out = std::fopen(f.GetString("replay", "").c_str(), "a");
      if (out == nullptr) return absl::InvalidArgumentError("--replay: cannot open " + f.GetString("replay", ""));
      const absl::Status replayed =
          Replay(s, prompts, w.name, static_cast<int32_t>(max_tokens),
                 {.min_n = static_cast<int32_t>(ngram_min), .max_n = static_cast<int32_t>(ngram_max)}, out);
      std::fclose(out);
      RETURN_IF_ERROR(replayed);
      continue;
    }
    for (int n : streams) {
      // Plain and every configuration in turn, `repeats` times, then plain
      // once more; each figure is the median of its runs, so a drift of the
      // machine during the run hits them all alike.
      std::vector<Measurement> plain_runs;
      std::vector<std::vector<Measurement>> config_runs(configs.size());
      for (int64_t rep = 0; rep < repeats; ++rep) {
        ASSIGN_OR_RETURN(Measurement p, Run(s, {"off", "off"}, prompts, n, static_cast<int32_t>(max_tokens)));
        plain_runs.push_back(std::move(p));
        for (size_t c = 0; c < configs.size(); ++c) {
          ASSIGN_OR_RETURN(Measurement m, Run(s, configs[c], prompts, n, static_cast<int32_t>(max_tokens)));
          config_runs[c].push_back(std::move(m));
        }
      }
      ASSIGN_OR_RETURN(Measurement last, Run(s, {"off", "off"}, prompts, n, static_cast<int32_t>(max_tokens)));
      plain_runs.push_back(std::move(last));
      auto median = [](const std::vector<Measurement>& runs, double (Measurement::*f)() const) {
        std::vector<double> v;
        for (const Measurement& m : runs) v.push_back((m.*f)());
        std::sort(v.begin(), v.end());
        const size_t h = v.size() / 2;
        return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2.0;
      };
      const Measurement& before = plain_runs.front();
      const double plain = median(plain_runs, &Measurement::per_token);
      const double plain_wall = median(plain_runs, &Measurement::wall_per_token);
      std::printf("%-10s %7d %-12s %7lld %9.2f %8s %8s %9s %9.2f %8s %5s  (plain ms/token first %.2f, last %.2f)\n",
                  w.name.c_str(), n, "plain", static_cast<long long>(before.tokens), plain * 1000.0, "1.00x", "-", "-",
                  plain_wall * 1000.0, "1.00x", "-", plain_runs.front().per_token() * 1000.0,
                  plain_runs.back().per_token() * 1000.0);
      for (size_t c = 0; c < configs.size(); ++c) {
        const Measurement& m = config_runs[c].front();
        const double per_token = median(config_runs[c], &Measurement::per_token);
        const double wall = median(config_runs[c], &Measurement::wall_per_token);
        const double accept = m.spec.drafted_tokens > 0
                                  ? static_cast<double>(m.spec.accepted_tokens) / m.spec.drafted_tokens
                                  : 0.0;
        const double per_pass =
            m.spec.verify_passes > 0 ? static_cast<double>(m.spec.accepted_tokens) / m.spec.verify_passes : 0.0;
        bool same = true;
        for (const Measurement& run : config_runs[c]) same = same && run.outputs == before.outputs;
        std::printf("%-10s %7d %-12s %7lld %9.2f %7.2fx %8.2f %9.2f %9.2f %7.2fx %5s\n", w.name.c_str(), n,
                    configs[c].name.c_str(), static_cast<long long>(m.tokens), per_token * 1000.0, plain / per_token,
                    accept, per_pass, wall * 1000.0, plain_wall / wall, same ? "yes" : "NO");
      }
      std::fflush(stdout);
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
  kvfleet::InitLogging(std::getenv("KVFLEET_LOG_LEVEL") != nullptr ? std::getenv("KVFLEET_LOG_LEVEL") : "warn");
  absl::StatusOr<kvfleet::flags::Flags> f = kvfleet::flags::Flags::Parse(
      args, {"model",        "device",      "cpu-activations", "threads",          "streams",
             "max-tokens",   "self-layers", "draft-model",     "max-draft-tokens", "workloads",
             "configs",      "ngram-min",   "ngram-max",       "suffix-factor",    "suffix-min-prob",
             "suffix-store", "repeats",     "replay",          "draft-heads",      "heads-top-k"},
      {});
  absl::Status s = f.ok() ? kvfleet::bench::Main(*f) : f.status();
  if (!s.ok()) {
    std::fprintf(stderr, "spec_decode_bench: %s\n%s", std::string(s.message()).c_str(), kvfleet::bench::kUsage);
    return 1;
  }
  return 0;
}
