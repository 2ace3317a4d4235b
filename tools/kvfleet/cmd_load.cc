// kvfleet load: drives a worker or a router with concurrent streaming requests and
// prints throughput and TTFT / inter-token / end-to-end latency percentiles,
// one row (or JSON object) per concurrency level. The work lives in
// tools/load/; this file turns flags into a workload and runs the levels.
#include <grpcpp/client_context.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "services/transport/grpc/grpc_channel.h"
#include "tools/kvfleet/client_tls.h"
#include "tools/kvfleet/commands.h"
#include "tools/kvfleet/router_client.h"
#include "tools/load/load_runner.h"
#include "tools/load/report_format.h"
#include "tools/load/workload.h"

namespace kvfleet::tools {

namespace {
constexpr char kUsage[] =
    R"(usage: kvfleet load --target HOST:PORT [--concurrency 1,8,32] [--requests N]
                    (--workload FILE.jsonl | [--prompt-tokens N] [--shared-prefix-tokens N]
                     [--max-tokens N] [--temperature T] [--seed N] [--ignore-eos])
                    [--warmup N] [--deadline-seconds S] [--cache-salt S] [--json]
                    [--tls-ca PEM [--tls-cert PEM --tls-key PEM] [--tls-name NAME]] [--token-file FILE]

Sends streaming Generate requests to a worker or a router (told apart by
asking: a worker answers GetInfo, a router ListModels), --concurrency at a time, and
prints one row per concurrency level: requests, errors, requests/s, output
tokens/s, and p50/p90/p99 of time to first token, inter-token latency and
end-to-end latency in milliseconds (nearest-rank percentiles).

  --target              the worker's or router's gRPC address (required)
  --concurrency         comma-separated levels, run in turn (default 1)
  --requests            requests per level (default 4 x concurrency)
  --workload            JSONL, one request a line, cycled to fill a level:
                        {"prompt_token_ids":[1,2,3],"max_tokens":64,
                         "temperature":0,"seed":7,"ignore_eos":true}
  Without --workload, random-token prompts (vocabulary size from GetInfo or ListModels):
  --prompt-tokens       prompt length (default 128)
  --shared-prefix-tokens  leading tokens shared by every prompt (default 0)
  --max-tokens          tokens to generate (default 128)
  --temperature         sampling temperature (default 0: greedy)
  --seed                of the prompts; request i samples with seed + i (default 0)
  --ignore-eos          generate max-tokens even past end-of-turn tokens
  --warmup              requests sent one at a time before measuring (default 1)
  --deadline-seconds    per-request deadline (default 300)
  --cache-salt          sent with every request, warm-up included; by default
                        each level gets a fresh salt, so no level reuses the
                        prefix cache of another level or an earlier run
  --json                one JSON object per level on stdout instead of a table
  --token-file FILE     a router with --auth-tokens: the bearer token (its first line; else $KVFLEET_API_TOKEN)

Inter-token latency: a message carrying k tokens, g seconds after the
previous one, counts k gaps of g/k; tokens in the first message count
toward TTFT only. See tools/load/README.md.
)";

constexpr const char* kGeneratorFlags[] = {"prompt-tokens", "shared-prefix-tokens", "max-tokens", "temperature", "seed",
                                           "ignore-eos"};

struct LoadCommand {
  std::string target;
  std::vector<int32_t> levels;
  int64_t requests_flag = 0;  // 0: 4 x concurrency
  int64_t warmup = 1;
  absl::Duration deadline;
  std::string cache_salt;  // empty: a fresh salt per level
  bool json = false;
  std::string bearer_token;  // --token-file or $KVFLEET_API_TOKEN

  int64_t RequestsAt(int32_t concurrency) const { return requests_flag > 0 ? requests_flag : 4 * concurrency; }
};

absl::StatusOr<LoadCommand> ReadCommand(const Flags& f) {
  LoadCommand c;
  ASSIGN_OR_RETURN(c.target, f.GetString("target"));
  ASSIGN_OR_RETURN(std::vector<int64_t> levels, f.GetIntList("concurrency", "1"));
  for (int64_t level : levels) {
    if (level < 1 || level > 100000) return absl::InvalidArgumentError("--concurrency levels must be in [1, 100000]");
    c.levels.push_back(static_cast<int32_t>(level));
  }
  ASSIGN_OR_RETURN(c.requests_flag, f.GetInt("requests", 0));
  ASSIGN_OR_RETURN(c.warmup, f.GetInt("warmup", 1));
  ASSIGN_OR_RETURN(double deadline, f.GetDouble("deadline-seconds", 300));
  if (c.requests_flag < 0 || c.warmup < 0 || !(deadline > 0)) {
    return absl::InvalidArgumentError("--requests and --warmup must be >= 0 and --deadline-seconds > 0");
  }
  c.deadline = absl::Seconds(deadline);
  c.cache_salt = f.GetString("cache-salt", "");
  c.json = f.GetSwitch("json");
  for (const char* name : kGeneratorFlags) {
    if (f.Has("workload") && f.Has(name)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " does not apply with --workload"));
    }
  }
  return c;
}

absl::StatusOr<load::GeneratorOptions> ReadGenerator(const Flags& f, int32_t vocab_size, int64_t num_requests) {
  ASSIGN_OR_RETURN(int64_t prompt_tokens, f.GetInt("prompt-tokens", 128));
  ASSIGN_OR_RETURN(int64_t shared, f.GetInt("shared-prefix-tokens", 0));
  ASSIGN_OR_RETURN(int64_t max_tokens, f.GetInt("max-tokens", 128));
  ASSIGN_OR_RETURN(double temperature, f.GetDouble("temperature", 0));
  ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 0));
  constexpr int64_t kLimit = 1 << 30;  // keeps the int32 fields from wrapping
  if (prompt_tokens > kLimit || shared > kLimit || max_tokens > kLimit || num_requests > kLimit) {
    return absl::InvalidArgumentError("--prompt-tokens, --shared-prefix-tokens, --max-tokens or --requests too large");
  }
  return load::GeneratorOptions{.num_requests = static_cast<int32_t>(num_requests),
                                .prompt_tokens = static_cast<int32_t>(prompt_tokens),
                                .shared_prefix_tokens = static_cast<int32_t>(shared),
                                .max_tokens = static_cast<int32_t>(max_tokens),
                                .vocab_size = vocab_size,
                                .seed = static_cast<uint64_t>(seed),
                                .temperature = static_cast<float>(temperature),
                                .ignore_eos = f.GetSwitch("ignore-eos")};
}

// The service behind --target, with what the workload needs from it.
struct Target {
  std::unique_ptr<kvfleet::v1::Worker::Stub> worker;
  std::unique_ptr<kvfleet::v1::Inference::Stub> router;
  std::unique_ptr<load::GenerationTarget> generation;
  int32_t vocab_size = 0;
};

absl::StatusOr<Target> Connect(const std::string& address, const transport::ClientChannelOptions& channel_options,
                               const std::string& bearer_token) {
  constexpr int kConnectSeconds = 10;
  auto channel = transport::CreateClientChannel(address, channel_options);
  Target t;
  t.worker = kvfleet::v1::Worker::NewStub(channel);
  grpc::ClientContext context;
  // Waits for a service whose port is not bound yet, up to the deadline; a
  // bound worker answers GetInfo even while its model loads.
  context.set_wait_for_ready(true);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(kConnectSeconds));
  kvfleet::v1::WorkerInfo info;
  const grpc::Status status = t.worker->GetInfo(&context, kvfleet::v1::GetInfoRequest(), &info);
  if (status.ok()) {
    std::cerr << "kvfleet load: worker " << address << " serves " << info.model_id() << " (vocab " << info.vocab_size()
              << ", max_num_seqs " << info.max_num_seqs() << ")\n";
    t.vocab_size = info.vocab_size();
    t.generation = std::make_unique<load::WorkerTarget>(*t.worker);
    return t;
  }
  if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
    return absl::UnavailableError(absl::StrCat("GetInfo on ", address, " failed (waited up to ", kConnectSeconds,
                                               " s): ", status.error_message()));
  }
  t.router = kvfleet::v1::Inference::NewStub(channel);
  grpc::ClientContext models_context;
  models_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(kConnectSeconds));
  if (!bearer_token.empty()) models_context.AddMetadata("authorization", "Bearer " + bearer_token);
  kvfleet::v1::ListModelsResponse models;
  const grpc::Status listed = t.router->ListModels(&models_context, kvfleet::v1::ListModelsRequest(), &models);
  if (!listed.ok() || models.models_size() == 0) {
    return absl::UnavailableError(absl::StrCat(address, " is neither a worker nor a router serving a model: ",
                                               listed.ok() ? "ListModels lists none" : listed.error_message()));
  }
  const kvfleet::v1::ModelInfo& model = models.models(0);
  std::cerr << "kvfleet load: router " << address << " serves " << model.id() << " (vocab " << model.vocab_size()
            << ", " << model.live_workers() << " live workers)\n";
  t.vocab_size = model.vocab_size();
  t.generation = std::make_unique<load::RouterTarget>(*t.router);
  return t;
}

// The requests a level of `n` sends: the workload's first n, cycled.
std::vector<load::LoadRequest> Take(const std::vector<load::LoadRequest>& workload, int64_t n) {
  std::vector<load::LoadRequest> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(workload[static_cast<size_t>(i) % workload.size()]);
  return out;
}

absl::StatusOr<std::vector<load::LoadRequest>> BuildWorkload(const Flags& f, const LoadCommand& c, int32_t vocab_size) {
  if (f.Has("workload")) return load::ReadWorkloadFile(f.GetString("workload", ""));
  int64_t most = 1;
  for (int32_t level : c.levels) most = std::max(most, c.RequestsAt(level));
  ASSIGN_OR_RETURN(load::GeneratorOptions generator, ReadGenerator(f, vocab_size, most));
  return load::GenerateWorkload(generator);
}

void PrintErrors(const load::LoadReport& r) {
  for (const auto& [code, n] : r.errors) {
    std::cerr << "kvfleet load: concurrency " << r.concurrency << ": " << n << " x " << code
              << " (first: " << r.error_examples.at(code) << ")\n";
  }
}

// Each level's salt: unique to this run and level unless --cache-salt is set.
std::string SaltFor(const LoadCommand& c, const std::string& nonce, const std::string& level) {
  return c.cache_salt.empty() ? absl::StrCat("kvfleet-load-", nonce, "-", level) : c.cache_salt;
}

absl::Status Warmup(load::GenerationTarget& target, const LoadCommand& c, const std::string& nonce,
                    const std::vector<load::LoadRequest>& workload) {
  if (c.warmup == 0) return absl::OkStatus();
  const load::LoadOptions options{.concurrency = 1,
                                  .deadline = c.deadline,
                                  .cache_salt = SaltFor(c, nonce, "warmup"),
                                  .request_id_prefix = "load-warmup-",
                                  .bearer_token = c.bearer_token};
  ASSIGN_OR_RETURN(load::LoadReport report, load::RunLoad(target, Take(workload, c.warmup), options));
  if (report.failed() > 0) {
    const auto& [code, message] = *report.error_examples.begin();
    return absl::UnavailableError(absl::StrCat("warm-up request failed: ", code, ": ", message));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunLoadClient(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(absl::StrCat(kUsage, "\n", kClientTlsUsage).c_str());
  ASSIGN_OR_RETURN(
      Flags f, Flags::Parse(args,
                            {"target", "concurrency", "requests", "workload", "prompt-tokens", "shared-prefix-tokens",
                             "max-tokens", "temperature", "seed", "deadline-seconds", "warmup", "cache-salt", "tls-ca",
                             "tls-cert", "tls-key", "tls-name", "token-file"},
                            {"ignore-eos", "json"}));
  ASSIGN_OR_RETURN(LoadCommand c, ReadCommand(f));
  ASSIGN_OR_RETURN(transport::ClientChannelOptions tls, ClientTlsFromFlags(f));
  ASSIGN_OR_RETURN(c.bearer_token, BearerTokenFromFlags(f));
  ASSIGN_OR_RETURN(Target target, Connect(c.target, tls, c.bearer_token));
  ASSIGN_OR_RETURN(std::vector<load::LoadRequest> workload, BuildWorkload(f, c, target.vocab_size));
  const std::string nonce = absl::StrCat(absl::ToUnixNanos(absl::Now()), "-", ::getpid());
  RETURN_IF_ERROR(Warmup(*target.generation, c, nonce, workload));

  if (!c.json) std::fputs(load::FormatTableHeader().c_str(), stdout);
  int empty_levels = 0;
  for (size_t i = 0; i < c.levels.size(); ++i) {
    const int32_t level = c.levels[i];
    // Salted by index, so a level listed twice ("8,8") starts cold twice.
    const load::LoadOptions options{.concurrency = level,
                                    .deadline = c.deadline,
                                    .cache_salt = SaltFor(c, nonce, absl::StrCat("level", i)),
                                    .request_id_prefix = absl::StrCat("load-c", level, "-"),
                                    .bearer_token = c.bearer_token};
    ASSIGN_OR_RETURN(load::LoadReport report,
                     load::RunLoad(*target.generation, Take(workload, c.RequestsAt(level)), options));
    std::fputs(c.json ? (load::FormatJson(report) + "\n").c_str() : load::FormatTableRow(report).c_str(), stdout);
    std::fflush(stdout);
    PrintErrors(report);
    empty_levels += report.completed == 0;
  }
  if (empty_levels > 0) return absl::UnavailableError(absl::StrCat(empty_levels, " level(s) completed no request"));
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
