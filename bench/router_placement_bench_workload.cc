// router_placement_bench's options and workload: parsing the flags, building
// the requests (the same for every policy), sending one, and replaying a
// phase open loop. See router_placement_bench.h.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/router_placement_bench.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "kvfleet/v1/inference.grpc.pb.h"

namespace kvfleet::bench::router_placement {
namespace {

constexpr int32_t kVocabSize = 49152;
constexpr std::chrono::minutes kRequestDeadline{20};

absl::Status ParsePromptRange(const std::string& value, Options& o) {
  std::vector<std::string> parts = absl::StrSplit(value, '-');
  if (parts.size() == 1) parts.push_back(parts[0]);
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &o.prompt_min) || !absl::SimpleAtoi(parts[1], &o.prompt_max) ||
      o.prompt_min < 1 || o.prompt_max < o.prompt_min) {
    return absl::InvalidArgumentError(absl::StrCat("--prompt-tokens wants MIN-MAX with 1 <= MIN <= MAX, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Options> ReadOptions(const flags::Flags& f) {
  Options o;
  ASSIGN_OR_RETURN(o.system_prompts, f.GetInt("system-prompts", o.system_prompts));
  RETURN_IF_ERROR(ParsePromptRange(f.GetString("prompt-tokens", "1024-2048"), o));
  ASSIGN_OR_RETURN(o.users_per_prompt, f.GetInt("users-per-prompt", o.users_per_prompt));
  ASSIGN_OR_RETURN(o.question_tokens, f.GetInt("question-tokens", o.question_tokens));
  ASSIGN_OR_RETURN(o.max_tokens, f.GetInt("max-tokens", o.max_tokens));
  ASSIGN_OR_RETURN(o.rate, f.GetDouble("rate", o.rate));
  ASSIGN_OR_RETURN(o.workers, f.GetInt("workers", o.workers));
  o.kv_cache_memory = f.GetString("kv-cache-memory", o.kv_cache_memory);
  ASSIGN_OR_RETURN(o.threads, f.GetInt("threads", o.threads));
  o.model = f.GetString("model", o.model);
  o.bin_dir = f.GetString("bin-dir", "");
  if (f.Has("policies")) o.policies = absl::StrSplit(f.GetString("policies", ""), ',', absl::SkipEmpty());
  if (f.Has("router-args")) {
    o.router_args = absl::StrSplit(f.GetString("router-args", ""), ' ', absl::SkipWhitespace());
  }
  const std::set<std::string> known = {"round_robin", "least_loaded", "prefix_aware"};
  const std::set<std::string> given(o.policies.begin(), o.policies.end());
  if (o.policies.empty() || given.size() != o.policies.size() ||
      !std::includes(known.begin(), known.end(), given.begin(), given.end())) {
    return absl::InvalidArgumentError("--policies wants distinct names among round_robin, least_loaded, prefix_aware");
  }
  ASSIGN_OR_RETURN(o.seed, f.GetInt("seed", o.seed));
  o.json = f.GetSwitch("json");
  if (o.system_prompts < 1 || o.users_per_prompt < 1 || o.question_tokens < 1 || o.max_tokens < 1 || !(o.rate > 0) ||
      !std::isfinite(o.rate) || o.workers < 1 || o.threads < 1) {
    return absl::InvalidArgumentError(
        "--system-prompts, --users-per-prompt, --question-tokens, --max-tokens, --workers and --threads must be "
        ">= 1 and --rate > 0");
  }
  return o;
}

// ---------------------------------------------------------------------------
// The workload: identical for every policy.

std::vector<BenchRequest> BuildWorkload(const Options& o) {
  std::mt19937_64 rng(static_cast<uint64_t>(o.seed));
  std::uniform_int_distribution<int32_t> token(kFirstToken, kVocabSize - 1);
  std::uniform_int_distribution<int64_t> length(o.prompt_min, o.prompt_max);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.system_prompts));
  for (std::vector<int32_t>& p : prompts) {
    p.resize(static_cast<size_t>(length(rng)));
    for (int32_t& t : p) t = token(rng);
  }
  // Every (system prompt, user) pair once, in random order.
  std::vector<int> order;
  for (int p = 0; p < o.system_prompts; ++p) order.insert(order.end(), static_cast<size_t>(o.users_per_prompt), p);
  std::shuffle(order.begin(), order.end(), rng);
  std::exponential_distribution<double> gap(o.rate);
  std::vector<BenchRequest> requests;
  double t = 0;
  for (int p : order) {
    BenchRequest r{.arrival_s = t, .system_prompt = p, .tokens = prompts[static_cast<size_t>(p)]};
    for (int64_t i = 0; i < o.question_tokens; ++i) r.tokens.push_back(token(rng));
    requests.push_back(std::move(r));
    t += gap(rng);
  }
  return requests;
}

// ---------------------------------------------------------------------------
// One request, and one phase (the whole workload through one router).

Outcome SendOne(v1::Inference::Stub& stub, const BenchRequest& r, const Options& o, const std::string& salt) {
  v1::GenerateTextRequest request;
  request.mutable_prompt_token_ids()->Add(r.tokens.begin(), r.tokens.end());
  v1::GenerationOptions& options = *request.mutable_options();
  options.mutable_stopping()->set_max_tokens(static_cast<int32_t>(o.max_tokens));
  options.mutable_stopping()->set_ignore_eos(true);
  options.set_cache_salt(salt);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kRequestDeadline);
  Outcome out;
  out.sent = Clock::now();
  std::unique_ptr<grpc::ClientReader<v1::GenerateTextResponse>> reader = stub.Generate(&ctx, request);
  v1::GenerateTextResponse message;
  bool first = true;
  while (reader->Read(&message)) {
    if (first && message.token_ids_size() > 0) {
      out.first_token = Clock::now();
      out.worker_id = message.worker_id();
      first = false;
    }
    if (message.has_usage()) {
      out.prompt_tokens = message.usage().prompt_tokens();
      out.cached_prompt_tokens = message.usage().cached_prompt_tokens();
      out.generated_tokens = message.usage().generated_tokens();
    }
  }
  const grpc::Status s = reader->Finish();
  out.finished = Clock::now();
  if (!s.ok()) {
    out.status = absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  } else if (first) {
    out.status = absl::InternalError("the stream ended without a token");
  }
  return out;
}

// Open loop: each request is sent at its arrival time on its own thread,
// whatever the earlier ones are doing.
std::vector<Outcome> Replay(v1::Inference::Stub& stub, const std::vector<BenchRequest>& requests, const Options& o,
                            const std::string& salt) {
  std::vector<Outcome> outcomes(requests.size());
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(requests[i].arrival_s)));
    threads.emplace_back([&, i] { outcomes[i] = SendOne(stub, requests[i], o, salt); });
  }
  for (std::thread& t : threads) t.join();
  return outcomes;
}

}  // namespace kvfleet::bench::router_placement
