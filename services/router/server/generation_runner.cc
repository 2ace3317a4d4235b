#include "services/router/server/generation_runner.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/block_hash.h"
#include "common/logging.h"
#include "services/router/frontend/text_stream.h"
#include "services/transport/grpc/grpc_status.h"

namespace kvfleet::router {

struct GenerationRunner::Stream {
  const RouterModel& model;
  ModelMetrics& metrics;  // the model's series
  const GenerationPlan& plan;
  const Sink& sink;
  Clock::time_point arrival;
  TextStream text;
  std::optional<chat::ChatOutputParser> chat_output;  // chat requests: reasoning and tool calls
  int tool_calls_sent = 0;
  std::vector<int32_t> generated;  // every token sent to the client, over all attempts
  std::string numerics;            // of the worker that produced them: a resumption must match it
  std::optional<Clock::time_point> last_tokens_at;
  int32_t cached_prompt_tokens = 0;  // the latest worker message's (a split's: its prefill worker's)
  // A split: the lease its prefill worker holds the prompt's KV under, and
  // once that worker handed off, where the decode half pulls from.
  std::string lease_id;
  std::optional<HandoffSource> handoff;
  // A split's first tokens, held until the decode worker streams
  // (GenerationRunnerOptions::stream_first_token_before_handoff).
  std::vector<v1::GenerateTextResponse> held;
  bool finished = false;
  grpc::Status error;  // the last attempt's, for kRequestError and the final UNAVAILABLE

  // The tokens of one worker message, as the client's message. Stops at the
  // token that completes a stop string. False when a token is outside the
  // vocabulary (a worker bug: the stream cannot be continued faithfully).
  bool AppendTokens(const v1::GenerateResponse& in, v1::GenerateTextResponse& out) {
    if (in.logprobs_size() != 0 && in.logprobs_size() != in.token_ids_size()) {
      error = grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat("the worker sent ", in.logprobs_size(),
                                                                    " logprobs for ", in.token_ids_size(), " tokens"));
      return false;
    }
    for (int i = 0; i < in.token_ids_size(); ++i) {
      const int32_t id = in.token_ids(i);
      absl::StatusOr<std::string> delta = text.Push(id);
      if (!delta.ok()) {
        error = grpc::Status(grpc::StatusCode::INTERNAL, std::string(delta.status().message()));
        return false;
      }
      generated.push_back(id);
      out.add_token_ids(id);
      if (in.logprobs_size() > 0) *out.add_logprobs() = in.logprobs(i);
      if (chat_output.has_value()) {
        AddChatOutput(chat_output->Push(MarkerText(id) + *delta), out);
      } else {
        out.mutable_text()->append(*delta);
      }
      if (text.stopped()) break;
    }
    return true;
  }

  // Control tokens are not text, but some tool-call formats start with one
  // ([TOOL_CALLS]): its text goes to the parser.
  std::string MarkerText(int32_t id) const {
    const auto& markers = model.chat_output_format().marker_tokens;
    if (markers.empty() || !model.tokenizer().IsControl(id)) return "";
    absl::StatusOr<std::string> piece = model.tokenizer().TokenToPiece(id);
    if (!piece.ok() || std::find(markers.begin(), markers.end(), *piece) == markers.end()) return "";
    return *piece;
  }

  void AddChatOutput(chat::ChatOutputDelta delta, v1::GenerateTextResponse& out) {
    out.mutable_text()->append(delta.content);
    out.mutable_reasoning_text()->append(delta.reasoning);
    for (chat::ParsedToolCall& call : delta.calls) {
      v1::ToolCallDelta& d = *out.add_tool_calls();
      if (call.name.empty()) {  // more of the last call's arguments
        d.set_index(tool_calls_sent - 1);
      } else {
        d.set_index(tool_calls_sent);
        d.set_id(absl::StrCat("call_", plan.worker_request.request_id(), "_", tool_calls_sent));
        d.set_name(std::move(call.name));
        ++tool_calls_sent;
      }
      d.set_arguments_delta(std::move(call.arguments_json));
    }
  }

  // The end of the output: what the detokenizer and the parsers held back.
  void Finish(v1::GenerateTextResponse& out) {
    std::string rest = text.Finish();
    if (!chat_output.has_value()) {
      out.mutable_text()->append(rest);
      return;
    }
    AddChatOutput(chat_output->Push(rest), out);
    AddChatOutput(chat_output->Finish(), out);
  }
};

GenerationRunner::GenerationRunner(RouteSelector& selector, WorkerPool& pool, RouterMetrics& metrics,
                                   GenerationRunnerOptions options)
    : selector_(selector), pool_(pool), metrics_(metrics), options_(options) {}

bool GenerationRunner::ClientIsGone(const CallContext& call) {
  return call.IsCancelled() || call.deadline() <= std::chrono::system_clock::now();
}

grpc::Status GenerationRunner::ClientEnded(const CallContext& call) {
  if (call.deadline() <= std::chrono::system_clock::now()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the client's deadline passed");
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled");
}

grpc::Status GenerationRunner::Run(const CallContext& context, const GenerationPlan& plan, Clock::time_point arrival,
                                   const Sink& sink) {
  const RouterModel& model = *plan.model.model;
  absl::StatusOr<TextStream> text = TextStream::Create(model.tokenizer(), plan.stop_strings);
  if (!text.ok()) return transport::ToGrpcStatus(text.status());
  Stream stream{.model = model,
                .metrics = metrics_.Model(model.id()),
                .plan = plan,
                .sink = sink,
                .arrival = arrival,
                .text = *std::move(text)};
  if (plan.is_chat) stream.chat_output.emplace(model.chat_output_format(), plan.chat_output);
  PromptBlocks blocks{.prompt = plan.prompt,
                      .root = RootBlockHash(model.id(), plan.model.fingerprint, plan.worker_request.cache_salt(),
                                            plan.model.LoraIdentity()),
                      .session_id = plan.session_id};
  absl::flat_hash_set<std::string> exclude;
  int failures_in_a_row = 0;
  bool any_overloaded = false;
  for (int attempt = 0;; ++attempt) {
    if (ClientIsGone(context)) return ClientEnded(context);
    // Before the first token any worker may serve; after it, only one whose
    // numerics continue the stream token for token.
    const RouteAsk ask{.numerics = stream.generated.empty() ? std::string() : stream.numerics,
                       .may_split = stream.generated.empty(),
                       .handoff = stream.handoff,
                       .lora = plan.model.lora,
                       .lora_digest = plan.model.lora_digest};
    absl::StatusOr<Route> route = selector_.Choose(model.id(), blocks, exclude, ask);
    if (!route.ok()) {
      // RESOURCE_EXHAUSTED invites a retry, which after tokens went out
      // would repeat them: then the stream failed (UNAVAILABLE).
      if (any_overloaded && stream.generated.empty()) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::StrCat("no worker can take the request now (the last said: ",
                                         stream.error.error_message(), "); retry later, with backoff"));
      }
      if (!stream.error.ok()) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            absl::StrCat("no worker could serve the request after ", attempt, " attempts (",
                                         route.status().message(), "); the last said: ", stream.error.error_message()));
      }
      return transport::ToGrpcStatus(route.status());
    }
    if (attempt == 0) stream.metrics.RecordOverhead(std::chrono::duration<double>(Clock::now() - arrival).count());
    const size_t tokens_before = stream.generated.size();
    if (tokens_before == 0) stream.numerics = route->numerics;
    const Outcome outcome = RunAttempt(context, *route, stream);
    // A refusal, a bad request or a failure before any token computed
    // nothing the router should remember sending there.
    const bool computed_nothing = outcome == Outcome::kOverloaded || outcome == Outcome::kRequestError ||
                                  (outcome == Outcome::kWorkerFailed && stream.generated.size() == tokens_before);
    if (computed_nothing) {
      selector_.Retract(*route, blocks);
    } else {
      selector_.Settle(*route);
    }
    switch (outcome) {
      case Outcome::kFinished:
        return grpc::Status::OK;
      case Outcome::kHandedOff:
        failures_in_a_row = 0;
        if (!route->kv_transfer_endpoint.empty()) {
          stream.handoff = HandoffSource{.worker_id = route->decision.worker_id,
                                         .endpoint = route->kv_transfer_endpoint,
                                         .blocks = static_cast<int32_t>(blocks.hashes.size()),
                                         .prefill_tokens_per_second = route->prefill_tokens_per_second};
        }
        break;
      case Outcome::kClientGone:
        return ClientEnded(context);
      case Outcome::kRequestError:
        return stream.error;
      case Outcome::kOverloaded:
        any_overloaded = true;
        exclude.insert(route->decision.worker_id);
        break;
      case Outcome::kWorkerFailed: {
        exclude.insert(route->decision.worker_id);
        const bool progressed = stream.generated.size() > tokens_before;
        failures_in_a_row = progressed ? 1 : failures_in_a_row + 1;
        if (failures_in_a_row >= options_.max_attempts) {
          return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              absl::StrCat(failures_in_a_row, " workers failed on this request in a row; the last: ",
                                           stream.error.error_message()));
        }
        if (stream.generated.empty()) {
          stream.metrics.RecordRetry();
        } else {
          stream.metrics.RecordResumption();
        }
        KVFLEET_LOG_WARN("request {}: worker {} failed after {} tokens ({}); {} on another worker",
                         plan.worker_request.request_id(), route->decision.worker_id, stream.generated.size(),
                         stream.error.error_message(), stream.generated.empty() ? "retrying" : "resuming");
        break;
      }
    }
  }
}

GenerationRunner::Outcome GenerationRunner::RunAttempt(const CallContext& context, const Route& route, Stream& stream) {
  v1::GenerateRequest request = stream.plan.worker_request;
  *request.mutable_placement() = selector_.TicketOf(route);
  if (route.prefill_only) {
    // Unique per split: the router's instance and this decision's ticket.
    stream.lease_id = absl::StrCat(absl::Hex(route.decision.router_instance), "-", route.decision.in_flight_ticket);
    request.mutable_prefill_handoff()->set_lease_id(stream.lease_id);
  }
  if (route.decision.peer_pull.has_value()) {
    request.mutable_kv_peer()->set_endpoint(route.decision.peer_pull->endpoint);
    request.mutable_kv_peer()->set_blocks(route.decision.peer_pull->blocks);
    if (stream.handoff.has_value() && route.decision.peer_pull->worker_id == stream.handoff->worker_id) {
      request.mutable_kv_peer()->set_lease_id(stream.lease_id);
    }
  }
  request.mutable_resumed_output_token_ids()->Assign(stream.generated.begin(), stream.generated.end());
  std::shared_ptr<grpc::ClientContext> call = context.WorkerCall();
  std::unique_ptr<grpc::ClientReaderInterface<v1::GenerateResponse>> reader = route.stub->Generate(call.get(), request);
  const int32_t prompt_tokens = static_cast<int32_t>(stream.plan.prompt.size());
  v1::GenerateResponse in;
  while (reader->Read(&in)) {
    v1::GenerateTextResponse out;
    out.set_worker_id(route.decision.worker_id);
    // After a handoff the decode worker counts what it pulled as cached:
    // the client's figure stays the prefill worker's.
    if (in.has_usage() && !stream.handoff.has_value()) stream.cached_prompt_tokens = in.usage().cached_prompt_tokens();
    const bool handed_off = in.finish_reason() == v1::FINISH_REASON_HANDOFF;
    if (handed_off && !route.prefill_only) {
      call->TryCancel();
      reader->Finish();
      stream.error =
          grpc::Status(grpc::StatusCode::INTERNAL,
                       absl::StrCat("worker ", route.decision.worker_id, " handed off a request it was not asked to"));
      return Outcome::kRequestError;
    }
    if (handed_off) in.set_finish_reason(v1::FINISH_REASON_UNSPECIFIED);
    if (!stream.AppendTokens(in, out)) {
      call->TryCancel();
      reader->Finish();
      return Outcome::kRequestError;
    }
    const bool last = stream.text.stopped() || in.finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
    if (last) {
      stream.Finish(out);
      v1::FinishReason reason = stream.text.stopped() ? v1::FINISH_REASON_STOP : in.finish_reason();
      if (reason == v1::FINISH_REASON_STOP && stream.tool_calls_sent > 0) reason = v1::FINISH_REASON_TOOL_CALLS;
      out.set_finish_reason(reason);
      v1::Usage& usage = *out.mutable_usage();
      usage.set_prompt_tokens(prompt_tokens);
      // After a resume the worker's figure covers prompt + resumed tokens.
      usage.set_cached_prompt_tokens(std::min(stream.cached_prompt_tokens, prompt_tokens));
      usage.set_generated_tokens(static_cast<int32_t>(stream.generated.size()));
    }
    if (handed_off && !last && !options_.stream_first_token_before_handoff) {
      stream.held.push_back(std::move(out));
      reader->Finish();
      return Outcome::kHandedOff;
    }
    const auto send = [&](const v1::GenerateTextResponse& m) {
      if (!stream.sink(m)) return false;
      if (m.token_ids_size() == 0) return true;
      const auto now = Clock::now();
      if (stream.last_tokens_at.has_value()) {
        stream.metrics.RecordInterToken(std::chrono::duration<double>(now - *stream.last_tokens_at).count());
      } else {
        stream.metrics.RecordFirstToken(std::chrono::duration<double>(now - stream.arrival).count(),
                                        route.prefill_only || stream.handoff.has_value());
      }
      stream.last_tokens_at = now;
      return true;
    };
    std::vector<v1::GenerateTextResponse> held;
    held.swap(stream.held);
    bool client_here = std::all_of(held.begin(), held.end(), send);
    // (A chat delta may be empty while a tag is held back.)
    if (client_here && (out.token_ids_size() > 0 || last)) client_here = send(out);
    if (!client_here) {
      call->TryCancel();
      reader->Finish();
      return Outcome::kClientGone;
    }
    if (last) {
      stream.metrics.RecordFinished(std::chrono::duration<double>(Clock::now() - stream.arrival).count(), prompt_tokens,
                                    out.usage().cached_prompt_tokens(), out.usage().generated_tokens());
      if (stream.text.stopped()) call->TryCancel();  // the worker must stop too
      reader->Finish();
      return Outcome::kFinished;
    }
    if (handed_off) {
      reader->Finish();
      return Outcome::kHandedOff;
    }
  }
  const grpc::Status status = reader->Finish();
  // The worker call is the client call's child: its CANCELLED or
  // DEADLINE_EXCEEDED is the client's doing (a worker never sends either to
  // a live caller), and may arrive before the server context notices.
  if (ClientIsGone(context) || status.error_code() == grpc::StatusCode::CANCELLED ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return Outcome::kClientGone;
  }
  if (status.ok()) {
    stream.error = grpc::Status(grpc::StatusCode::UNAVAILABLE, absl::StrCat("worker ", route.decision.worker_id,
                                                                            " ended the stream without a finish"));
    return Outcome::kWorkerFailed;
  }
  stream.error = status;
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED:
      return Outcome::kRequestError;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Outcome::kOverloaded;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNKNOWN:
      pool_.ReportFailure(route.decision.worker_id);
      return Outcome::kWorkerFailed;
    default:
      return Outcome::kWorkerFailed;
  }
}

}  // namespace kvfleet::router
