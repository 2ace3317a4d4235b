// The kvfleet CLI as a client of the router's public API (kvfleet.v1.Inference):
// the flags `kvfleet generate`, `kvfleet chat` and `kvfleet up --ask` share,
// the requests built from them, and one streamed call printed as it arrives
// (text or token ids to stdout, a one-line summary to stderr).
//
// Stateless functions; each call opens its own channel. A gRPC error becomes
// a status of the same code whose message starts with the code's name.
//
//   ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, WithRouterFlags({"prompt"}), RouterSwitches()));
//   ASSIGN_OR_RETURN(CallSettings call, CallSettingsFromFlags(flags));
//   ASSIGN_OR_RETURN(v1::GenerateTextRequest request, GenerateRequestFromFlags(flags));
//   RETURN_IF_ERROR(StreamGenerate(call, request, stdout, stderr));
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/flags/flags.h"
#include "kvfleet/v1/inference.grpc.pb.h"

namespace kvfleet::tools {

inline constexpr char kDefaultRouter[] = "127.0.0.1:50060";
// The same default as `kvfleet generate --local`.
inline constexpr int64_t kDefaultMaxTokens = 256;

// The valued flags every router call takes (--router, --tls-ca, --token-file, --timeout, --output,
// sampling and stopping, --stop, --cache-salt) plus `extra`.
std::set<std::string> WithRouterFlags(std::set<std::string> extra);
// The switches every router call takes (--ignore-eos).
std::set<std::string> RouterSwitches();

enum class OutputMode { kText, kIds };

struct CallSettings {
  std::string router = kDefaultRouter;
  std::string tls_ca;  // set: TLS to the router, its certificate checked against this CA (--tls-ca)
  // Sent as `authorization: Bearer`; from $KVFLEET_API_TOKEN or --token-file,
  // never a flag (command lines are visible to every user of the machine).
  std::string bearer_token;
  absl::Duration timeout = absl::InfiniteDuration();  // the call's deadline
  OutputMode output = OutputMode::kText;
};

absl::StatusOr<CallSettings> CallSettingsFromFlags(const flags::Flags& flags);

// The bearer token: the first line of --token-file, else $KVFLEET_API_TOKEN,
// else none. NOT_FOUND naming the file when it cannot be read.
absl::StatusOr<std::string> BearerTokenFromFlags(const flags::Flags& flags);

// Sampling, stopping, --stop (repeatable; each value is one stop string,
// commas included) and --cache-salt. Unset flags leave the proto's defaults
// (greedy), except max_tokens, which defaults to kDefaultMaxTokens.
absl::StatusOr<v1::GenerationOptions> GenerationOptionsFromFlags(const flags::Flags& flags);

// Exactly one of --prompt TEXT or --prompt-token-ids 1,2,3.
absl::StatusOr<v1::GenerateTextRequest> GenerateRequestFromFlags(const flags::Flags& flags);

// `message` as the user's turn, after --system when given.
absl::StatusOr<v1::ChatRequest> ChatRequestFromFlags(const flags::Flags& flags, const std::string& message);

// What one stream delivered, for the summary.
struct StreamResult {
  std::vector<int32_t> token_ids;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::Usage usage;
  std::vector<std::string> workers;  // distinct, in the order they served (more than one after a failover)
};

// "[12 prompt tokens (0 cached), 5 generated, finish: stop, worker worker-0]".
std::string FormatSummary(const StreamResult& result);

// Prints a stream's responses as they arrive: text as it comes, or (ids)
// nothing until Finish() prints the ids as one comma-separated line.
class StreamPrinter {
 public:
  StreamPrinter(OutputMode mode, std::FILE* out) : mode_(mode), out_(out) {}

  void OnResponse(const v1::GenerateTextResponse& response);
  // Ends the output with a newline (text) or the ids line.
  void Finish();
  // The stream failed: ends a partial line of text, prints no ids.
  void Interrupt();

  const StreamResult& result() const { return result_; }

 private:
  const OutputMode mode_;
  std::FILE* const out_;
  StreamResult result_;
  bool printed_text_ = false;
};

// "UNAVAILABLE: router 127.0.0.1:50060: <message>" with the same code; OK stays OK.
absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& router);

// Calls Generate (or Chat) on the router, printing the stream to `out` and
// the summary to `err`.
absl::Status StreamGenerate(const CallSettings& call, const v1::GenerateTextRequest& request, std::FILE* out,
                            std::FILE* err);
absl::Status StreamChat(const CallSettings& call, const v1::ChatRequest& request, std::FILE* out, std::FILE* err);

absl::StatusOr<v1::ListModelsResponse> ListModels(const CallSettings& call, absl::Duration timeout);

}  // namespace kvfleet::tools
