// A public API call as the router receives it: any bytes parsed as a
// GenerateTextRequest or a ChatRequest and planned against a tiny model and
// the limits table. Nothing crashes, a refusal is a client error, and
// whatever the router plans the worker accepts under the same limits (the
// two checks agree).
#include <cstdlib>
#include <memory>

#include "kvfleet/v1/inference.pb.h"
#include "services/router/server/generation_plan.h"
#include "services/worker/server/proto_convert.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_router_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvfleet;
  if (size == 0) return 0;
  const kvfleet::router::ServedModel& model = kvfleet::fuzz::FuzzRouterModel();
  // The first byte: which call, and whether the limits are lowered.
  const uint8_t mode = data[0];
  limits::RequestLimits limits;
  if (mode & 2) {
    limits = {.max_prompt_tokens = 32,
              .max_output_tokens = 16,
              .max_stop_strings = 2,
              .max_stop_string_bytes = 8,
              .max_stop_token_ids = 2,
              .max_top_logprobs = 2,
              .max_request_id_bytes = 8,
              .max_cache_salt_bytes = 8,
              .max_priority = 2,
              .max_chat_messages = 3,
              .max_prompt_bytes = 64};
  }
  absl::StatusOr<router::GenerationPlan> plan;
  if (mode & 1) {
    v1::ChatRequest request;
    if (!request.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
    plan = router::PlanChat(model, request, 7, limits);
  } else {
    v1::GenerateTextRequest request;
    if (!request.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
    plan = router::PlanGenerate(model, request, 7, limits);
  }
  if (!plan.ok()) {
    fuzz::Check(kvfleet::fuzz::IsRouterClientError(plan.status().code()), "a refusal that is not a client error");
    return 0;
  }
  fuzz::Check(!plan->prompt.empty(), "an empty prompt planned");
  absl::StatusOr<engine::EngineRequest> at_worker =
      worker::ToEngineRequest(plan->worker_request, RequestId(1), model.model->context_length(), limits);
  fuzz::Check(at_worker.ok(),
              "the worker refuses what the router planned: " + std::string(at_worker.status().message()));
  return 0;
}
