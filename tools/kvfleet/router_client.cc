#include "tools/kvfleet/router_client.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/token_id.h"
#include "services/transport/grpc/grpc_channel.h"

namespace kvfleet::tools {
namespace {

using flags::Flags;

absl::StatusOr<int32_t> GetInt32(const Flags& f, const std::string& name, int64_t fallback) {
  ASSIGN_OR_RETURN(int64_t v, f.GetInt(name, fallback));
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " ", v, " is out of range"));
  }
  return static_cast<int32_t>(v);
}

absl::StatusOr<float> GetFloat(const Flags& f, const std::string& name, double fallback) {
  ASSIGN_OR_RETURN(double v, f.GetDouble(name, fallback));
  return static_cast<float>(v);
}

absl::Status ReadSampling(const Flags& f, v1::SamplingParams& s) {
  ASSIGN_OR_RETURN(float temperature, GetFloat(f, "temperature", 0.0));
  s.set_temperature(temperature);
  ASSIGN_OR_RETURN(int32_t top_k, GetInt32(f, "top-k", 0));
  s.set_top_k(top_k);
  ASSIGN_OR_RETURN(float min_p, GetFloat(f, "min-p", 0.0));
  s.set_min_p(min_p);
  ASSIGN_OR_RETURN(float presence, GetFloat(f, "presence-penalty", 0.0));
  s.set_presence_penalty(presence);
  ASSIGN_OR_RETURN(float frequency, GetFloat(f, "frequency-penalty", 0.0));
  s.set_frequency_penalty(frequency);
  // Optional in the proto: set only when given, so the server's "unset" applies otherwise.
  if (f.Has("top-p")) {
    ASSIGN_OR_RETURN(float top_p, GetFloat(f, "top-p", 1.0));
    s.set_top_p(top_p);
  }
  if (f.Has("repetition-penalty")) {
    ASSIGN_OR_RETURN(float rep, GetFloat(f, "repetition-penalty", 1.0));
    s.set_repetition_penalty(rep);
  }
  if (f.Has("seed")) {
    ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 0));
    s.set_seed(static_cast<uint64_t>(seed));
  }
  return absl::OkStatus();
}

const char* FinishName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    case v1::FINISH_REASON_ERROR:
      return "error";
    default:
      return "none";
  }
}

std::unique_ptr<v1::Inference::Stub> NewStub(const CallSettings& call) {
  return v1::Inference::NewStub(transport::CreateClientChannel(call.router, {.tls = {.ca = call.tls_ca}}));
}

void Authorize(grpc::ClientContext& context, const CallSettings& call) {
  if (!call.bearer_token.empty()) context.AddMetadata("authorization", "Bearer " + call.bearer_token);
}

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  if (timeout != absl::InfiniteDuration()) context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// Reads a stream to its end through a printer; the summary goes to `err`
// once the call succeeded.
absl::Status Drain(grpc::ClientReader<v1::GenerateTextResponse>& reader, const CallSettings& call, std::FILE* out,
                   std::FILE* err) {
  StreamPrinter printer(call.output, out);
  v1::GenerateTextResponse response;
  while (reader.Read(&response)) printer.OnResponse(response);
  const grpc::Status status = reader.Finish();
  if (!status.ok()) {
    printer.Interrupt();
    return FromGrpcStatus(status, call.router);
  }
  printer.Finish();
  std::fprintf(err, "%s\n", FormatSummary(printer.result()).c_str());
  return absl::OkStatus();
}

}  // namespace

std::set<std::string> WithRouterFlags(std::set<std::string> extra) {
  for (const char* name : {"router", "model-name", "tls-ca", "token-file", "timeout", "output", "max-tokens",
                           "temperature", "top-k", "top-p", "min-p", "repetition-penalty", "presence-penalty",
                           "frequency-penalty", "seed", "stop-token-ids", "stop", "cache-salt", "speculation"}) {
    extra.insert(name);
  }
  return extra;
}

std::set<std::string> RouterSwitches() { return {"ignore-eos"}; }

absl::StatusOr<std::string> BearerTokenFromFlags(const Flags& flags) {
  if (flags.Has("token-file")) {
    const std::string path = flags.GetString("token-file", "");
    std::ifstream file(path);
    std::string token;
    if (!file || !std::getline(file, token)) {
      return absl::NotFoundError(absl::StrCat("cannot read a token from --token-file ", path));
    }
    return std::string(absl::StripAsciiWhitespace(token));
  }
  const char* env = std::getenv("KVFLEET_API_TOKEN");
  return env != nullptr ? std::string(absl::StripAsciiWhitespace(env)) : std::string();
}

absl::StatusOr<CallSettings> CallSettingsFromFlags(const Flags& flags) {
  CallSettings call;
  call.router = flags.GetString("router", kDefaultRouter);
  if (call.router.empty()) return absl::InvalidArgumentError("--router needs HOST:PORT");
  call.tls_ca = flags.GetString("tls-ca", "");
  ASSIGN_OR_RETURN(call.bearer_token, BearerTokenFromFlags(flags));
  ASSIGN_OR_RETURN(double seconds, flags.GetDouble("timeout", 0.0));
  if (seconds < 0) return absl::InvalidArgumentError(absl::StrCat("--timeout must be >= 0, got ", seconds));
  if (seconds > 0) call.timeout = absl::Seconds(seconds);
  const std::string output = flags.GetString("output", "text");
  if (output != "text" && output != "ids") {
    return absl::InvalidArgumentError(absl::StrCat("--output must be text or ids, got '", output, "'"));
  }
  call.output = output == "ids" ? OutputMode::kIds : OutputMode::kText;
  return call;
}

absl::StatusOr<v1::GenerationOptions> GenerationOptionsFromFlags(const Flags& flags) {
  v1::GenerationOptions options;
  RETURN_IF_ERROR(ReadSampling(flags, *options.mutable_sampling()));
  v1::StoppingParams& stopping = *options.mutable_stopping();
  ASSIGN_OR_RETURN(int32_t max_tokens, GetInt32(flags, "max-tokens", kDefaultMaxTokens));
  stopping.set_max_tokens(max_tokens);
  ASSIGN_OR_RETURN(std::vector<model::TokenId> stop_ids, flags.GetTokenIds("stop-token-ids"));
  for (model::TokenId id : stop_ids) stopping.add_stop_token_ids(id);
  stopping.set_ignore_eos(flags.GetSwitch("ignore-eos"));
  for (const std::string& stop : flags.GetStrings("stop")) {
    if (stop.empty()) return absl::InvalidArgumentError("--stop needs a non-empty string");
    options.add_stop(stop);
  }
  options.set_cache_salt(flags.GetString("cache-salt", ""));
  // The router's model by its served name or id; empty: its only one.
  options.set_model(flags.GetString("model-name", ""));
  // The worker checks the name against the proposers it loaded.
  if (flags.Has("speculation")) options.mutable_speculation()->set_proposer(flags.GetString("speculation", ""));
  return options;
}

absl::StatusOr<v1::GenerateTextRequest> GenerateRequestFromFlags(const Flags& flags) {
  if (flags.Has("prompt") == flags.Has("prompt-token-ids")) {
    return absl::InvalidArgumentError("give exactly one of --prompt or --prompt-token-ids");
  }
  v1::GenerateTextRequest request;
  if (flags.Has("prompt")) {
    request.set_prompt(flags.GetString("prompt", ""));
  } else {
    ASSIGN_OR_RETURN(std::vector<model::TokenId> ids, flags.GetTokenIds("prompt-token-ids"));
    if (ids.empty()) return absl::InvalidArgumentError("--prompt-token-ids needs at least one id");
    for (model::TokenId id : ids) request.add_prompt_token_ids(id);
  }
  ASSIGN_OR_RETURN(*request.mutable_options(), GenerationOptionsFromFlags(flags));
  return request;
}

absl::StatusOr<v1::ChatRequest> ChatRequestFromFlags(const Flags& flags, const std::string& message) {
  v1::ChatRequest request;
  if (flags.Has("system")) {
    v1::ChatMessage& system = *request.add_messages();
    system.set_role("system");
    system.set_content(flags.GetString("system", ""));
  }
  v1::ChatMessage& user = *request.add_messages();
  user.set_role("user");
  user.set_content(message);
  ASSIGN_OR_RETURN(*request.mutable_options(), GenerationOptionsFromFlags(flags));
  return request;
}

std::string FormatSummary(const StreamResult& result) {
  std::string served = "worker (unknown)";
  if (result.workers.size() == 1) served = absl::StrCat("worker ", result.workers[0]);
  if (result.workers.size() > 1) served = absl::StrCat("workers ", absl::StrJoin(result.workers, " then "));
  return absl::StrCat("[", result.usage.prompt_tokens(), " prompt tokens (", result.usage.cached_prompt_tokens(),
                      " cached), ", result.usage.generated_tokens(),
                      " generated, finish: ", FinishName(result.finish_reason), ", ", served, "]");
}

void StreamPrinter::OnResponse(const v1::GenerateTextResponse& response) {
  result_.token_ids.insert(result_.token_ids.end(), response.token_ids().begin(), response.token_ids().end());
  if (!response.worker_id().empty() &&
      std::find(result_.workers.begin(), result_.workers.end(), response.worker_id()) == result_.workers.end()) {
    result_.workers.push_back(response.worker_id());
  }
  if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    result_.finish_reason = response.finish_reason();
    result_.usage = response.usage();
  }
  if (mode_ == OutputMode::kText && !response.text().empty()) {
    std::fwrite(response.text().data(), 1, response.text().size(), out_);
    std::fflush(out_);
    printed_text_ = true;
  }
}

void StreamPrinter::Interrupt() {
  if (printed_text_) std::fputc('\n', out_);
  std::fflush(out_);
}

void StreamPrinter::Finish() {
  if (mode_ == OutputMode::kText) {
    std::fputc('\n', out_);
  } else {
    std::fprintf(out_, "%s\n", absl::StrJoin(result_.token_ids, ",").c_str());
  }
  std::fflush(out_);  // the output before the summary on a shared terminal
}

absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& router) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share their numbering.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  return absl::Status(code,
                      absl::StrCat(absl::StatusCodeToString(code), ": router ", router, ": ", status.error_message()));
}

absl::Status StreamGenerate(const CallSettings& call, const v1::GenerateTextRequest& request, std::FILE* out,
                            std::FILE* err) {
  auto stub = NewStub(call);
  grpc::ClientContext context;
  SetDeadline(context, call.timeout);
  Authorize(context, call);
  std::unique_ptr<grpc::ClientReader<v1::GenerateTextResponse>> reader = stub->Generate(&context, request);
  return Drain(*reader, call, out, err);
}

absl::Status StreamChat(const CallSettings& call, const v1::ChatRequest& request, std::FILE* out, std::FILE* err) {
  auto stub = NewStub(call);
  grpc::ClientContext context;
  SetDeadline(context, call.timeout);
  Authorize(context, call);
  std::unique_ptr<grpc::ClientReader<v1::GenerateTextResponse>> reader = stub->Chat(&context, request);
  return Drain(*reader, call, out, err);
}

absl::StatusOr<v1::ListModelsResponse> ListModels(const CallSettings& call, absl::Duration timeout) {
  auto stub = NewStub(call);
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  Authorize(context, call);
  v1::ListModelsResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub->ListModels(&context, v1::ListModelsRequest(), &response), call.router));
  return response;
}

}  // namespace kvfleet::tools
