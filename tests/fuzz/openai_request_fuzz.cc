// An OpenAI-compatible HTTP body as the router receives it: any bytes
// parsed as a chat or completion call (or a tokenize / detokenize body),
// then planned against a tiny model and formatted back as a response.
// Nothing crashes or throws; every refusal is a client error; the JSON the
// formatter writes always parses.
#include <nlohmann/json.hpp>
#include <string_view>

#include "services/router/openai/openai_request.h"
#include "services/router/openai/openai_response.h"
#include "services/router/server/generation_plan.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_router_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvfleet;
  using namespace kvfleet::router;
  if (size == 0) return 0;
  const uint8_t mode = data[0];  // which endpoint
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode % 4 == 2) {
    absl::StatusOr<openai::TokenizeCall> t = openai::ParseTokenizeCall(body);
    fuzz::Check(t.ok() || t.status().code() == absl::StatusCode::kInvalidArgument, "tokenize refusal code");
    return 0;
  }
  if (mode % 4 == 3) {
    absl::StatusOr<v1::DetokenizeRequest> d = openai::ParseDetokenizeCall(body);
    fuzz::Check(d.ok() || d.status().code() == absl::StatusCode::kInvalidArgument, "detokenize refusal code");
    return 0;
  }
  const openai::Endpoint endpoint = mode % 4 == 0 ? openai::Endpoint::kChat : openai::Endpoint::kCompletion;
  absl::StatusOr<openai::CompletionCall> call = openai::ParseCompletionCall(endpoint, body);
  if (!call.ok()) {
    fuzz::Check(call.status().code() == absl::StatusCode::kInvalidArgument, "a refusal is INVALID_ARGUMENT");
    return 0;
  }
  const ServedModel& model = kvfleet::fuzz::FuzzRouterModel();
  absl::StatusOr<GenerationPlan> plan =
      endpoint == openai::Endpoint::kChat ? PlanChat(model, call->chat, 7) : PlanGenerate(model, call->completion, 7);
  if (!plan.ok()) {
    fuzz::Check(kvfleet::fuzz::IsRouterClientError(plan.status().code()) ||
                    plan.status().code() == absl::StatusCode::kFailedPrecondition,
                "a planning refusal is the client's");
    return 0;
  }
  // The planned prompt echoed back as generated tokens, with logprobs.
  v1::GenerateTextResponse message;
  for (int32_t id : plan->prompt) {
    message.add_token_ids(id);
    v1::TokenLogprob& lp = *message.add_logprobs();
    lp.set_token_id(id);
    lp.add_top()->set_token_id(id);
  }
  message.set_text(std::string(body.substr(0, 64)));  // any bytes, as a cut character would be
  message.set_finish_reason(v1::FINISH_REASON_STOP);
  openai::CompletionFormatter formatter(*call, "id", 0, "tiny", model.model->tokenizer());
  const std::string events = formatter.StreamEvents(message) + formatter.StreamEnd();
  formatter.Add(message);
  const std::string whole = formatter.Body();
  fuzz::Check(nlohmann::json::accept(whole), "the whole response is JSON");
  size_t start = 0;
  while (start < events.size()) {
    const size_t end = events.find("\n\n", start);
    fuzz::Check(end != std::string::npos, "an event ends with a blank line");
    const std::string_view frame(events.data() + start, end - start);
    fuzz::Check(frame.substr(0, 6) == "data: ", "an event is a data line");
    fuzz::Check(frame == "data: [DONE]" || nlohmann::json::accept(frame.substr(6)), "an event's data is JSON");
    start = end + 2;
  }
  return 0;
}
