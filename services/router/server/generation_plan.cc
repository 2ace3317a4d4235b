#include "services/router/server/generation_plan.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/tokenizer/stop_string_matcher.h"
#include "services/router/server/chat_inputs.h"

namespace kvfleet::router {
namespace {

// What can be checked before the prompt is tokenized or rendered.
absl::Status CheckOptions(const limits::RequestLimits& limits, const v1::GenerationOptions& options) {
  RETURN_IF_ERROR(limits::CheckGeneration(limits, {.request_id = options.request_id(),
                                                   .session_id = options.session_id(),
                                                   .cache_salt = options.cache_salt(),
                                                   .priority = options.priority(),
                                                   .stopping = &options.stopping(),
                                                   .top_logprobs = options.top_logprobs()}));
  return limits::CheckStopStrings(limits, options.stop());
}

absl::StatusOr<GenerationPlan> Plan(const ServedModel& served, std::vector<int32_t> prompt,
                                    const v1::GenerationOptions& options, uint64_t fresh_seed,
                                    const limits::RequestLimits& limits) {
  const RouterModel& model = *served.model;
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty: give at least one token");
  RETURN_IF_ERROR(limits::CheckLength(limits, static_cast<int64_t>(prompt.size()), options.stopping().max_tokens(),
                                      model.context_length()));
  std::vector<std::string> stops(options.stop().begin(), options.stop().end());
  if (absl::Status s = model::StopStringMatcher::Create(stops).status(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("options.stop: ", s.message()));
  }
  GenerationPlan plan;
  plan.model = served;
  plan.stop_strings = std::move(stops);
  v1::GenerateRequest& w = plan.worker_request;
  w.set_request_id(options.request_id());
  w.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
  *w.mutable_sampling() = options.sampling();
  if (w.sampling().temperature() > 0 && !w.sampling().has_seed()) w.mutable_sampling()->set_seed(fresh_seed);
  *w.mutable_stopping() = options.stopping();
  w.set_cache_salt(options.cache_salt());
  w.set_lora_adapter(served.lora);
  w.set_priority(options.priority());
  w.set_logprobs(options.logprobs());
  w.set_top_logprobs(options.top_logprobs());
  if (options.has_speculation()) *w.mutable_speculation() = options.speculation();
  if (options.has_constraint()) *w.mutable_constraint() = options.constraint();
  for (const auto& [token, bias] : options.sampling().logit_bias()) {
    if (token < 0 || token >= model.vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias names token ", token, ", outside the vocabulary [0, ", model.vocab_size(), ")"));
    }
  }
  plan.prompt = std::move(prompt);
  plan.session_id = options.session_id();
  return plan;
}

}  // namespace

absl::StatusOr<GenerationPlan> PlanGenerate(const ServedModel& served, const v1::GenerateTextRequest& request,
                                            uint64_t fresh_seed, const limits::RequestLimits& limits) {
  const RouterModel& model = *served.model;
  RETURN_IF_ERROR(CheckOptions(limits, request.options()));
  const bool has_text = !request.prompt().empty();
  const bool has_ids = request.prompt_token_ids_size() > 0;
  if (has_text == has_ids) {
    return absl::InvalidArgumentError("give exactly one of prompt (text) or prompt_token_ids");
  }
  std::vector<int32_t> prompt;
  if (has_text) {
    RETURN_IF_ERROR(limits::CheckPromptBytes(limits, "prompt", static_cast<int64_t>(request.prompt().size())));
    ASSIGN_OR_RETURN(prompt, model.EncodePrompt(request.prompt()));
  } else {
    prompt.assign(request.prompt_token_ids().begin(), request.prompt_token_ids().end());
    RETURN_IF_ERROR(model.CheckTokenIds(prompt, "prompt_token_ids"));
  }
  return Plan(served, std::move(prompt), request.options(), fresh_seed, limits);
}

// tool_choice "required" or a named function: the output must be a call,
// in the format the model's template teaches, enforced by the worker's
// constrained decoding. Under "auto" with Hermes-style calls, each call the
// model starts is enforced from its start tag on (a triggered constraint),
// so it is always valid and can stream; other formats are parsed as written.
absl::StatusOr<std::optional<v1::OutputConstraint>> ToolCallConstraint(const RouterModel& model,
                                                                       const v1::ChatRequest& request) {
  const v1::ToolChoice& choice = request.tool_choice();
  const chat::ToolCallFormat format = model.chat_output_format().tool_calls;
  const bool enforced = choice.mode() == v1::ToolChoice::REQUIRED || choice.mode() == v1::ToolChoice::FUNCTION;
  const bool triggered = choice.mode() == v1::ToolChoice::AUTO && format == chat::ToolCallFormat::kHermes &&
                         !request.tools().empty() && !request.options().has_constraint();
  if (!enforced && !triggered) return std::nullopt;
  if (format != chat::ToolCallFormat::kHermes && format != chat::ToolCallFormat::kLlama3Json) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tool_choice '", choice.mode() == v1::ToolChoice::REQUIRED ? "required" : choice.function_name(),
        "' needs the output constrained to a call, and model ", model.id(), "'s template teaches the '",
        std::string(chat::ToolCallFormatName(format)), "' format, which kvfleet cannot enforce; use tool_choice auto"));
  }
  v1::OutputConstraint out;
  v1::ToolCallConstraint& calls = *out.mutable_tool_calls();
  calls.set_format(std::string(chat::ToolCallFormatName(format)));
  calls.set_triggered(triggered);
  calls.set_parallel(choice.mode() == v1::ToolChoice::REQUIRED &&
                     (!request.has_parallel_tool_calls() || request.parallel_tool_calls()));
  for (const v1::Tool& t : request.tools()) {
    if (choice.mode() == v1::ToolChoice::FUNCTION && t.name() != choice.function_name()) continue;
    v1::ToolSchema& schema = *calls.add_tools();
    schema.set_name(t.name());
    schema.set_parameters_json(t.parameters_json());
  }
  return out;
}

absl::StatusOr<ChatPrompt> EncodeChatRequest(const RouterModel& model, const v1::ChatRequest& request,
                                             const limits::RequestLimits& limits,
                                             const openai::SentConversation* sent) {
  if (request.messages_size() == 0) return absl::InvalidArgumentError("messages is empty: give at least one");
  RETURN_IF_ERROR(limits::CheckChatMessages(limits, request.messages_size()));
  int64_t content_bytes = 0;
  for (const v1::ChatMessage& m : request.messages()) content_bytes += static_cast<int64_t>(m.content().size());
  RETURN_IF_ERROR(limits::CheckPromptBytes(limits, "the messages' contents together", content_bytes));
  ASSIGN_OR_RETURN(ChatPromptInputs inputs, ChatInputsFromRequest(request, sent));
  ChatPrompt prompt;
  ASSIGN_OR_RETURN(prompt.ids, model.EncodeChat(inputs.template_inputs));
  prompt.output = std::move(inputs.output);
  prompt.output.reasoning_starts_inside = model.EndsInsideReasoning(prompt.ids);
  return prompt;
}

absl::StatusOr<GenerationPlan> PlanChat(const ServedModel& served, const v1::ChatRequest& request, uint64_t fresh_seed,
                                        const limits::RequestLimits& limits, const openai::SentConversation* sent) {
  const RouterModel& model = *served.model;
  RETURN_IF_ERROR(CheckOptions(limits, request.options()));
  ASSIGN_OR_RETURN(ChatPrompt prompt, EncodeChatRequest(model, request, limits, sent));
  ASSIGN_OR_RETURN(GenerationPlan plan, Plan(served, std::move(prompt.ids), request.options(), fresh_seed, limits));
  ASSIGN_OR_RETURN(std::optional<v1::OutputConstraint> calls, ToolCallConstraint(model, request));
  if (calls.has_value()) {
    if (request.options().has_constraint()) {
      return absl::InvalidArgumentError(
          "tool_choice asks for a tool call and the request also constrains the "
          "output (response_format): give one of them");
    }
    *plan.worker_request.mutable_constraint() = *std::move(calls);
  }
  plan.is_chat = true;
  plan.chat_output = std::move(prompt.output);
  // A Hermes call the worker enforces is valid by construction: it streams.
  plan.chat_output.stream_call_arguments = plan.worker_request.constraint().has_tool_calls() &&
                                           plan.worker_request.constraint().tool_calls().format() == "hermes";
  return plan;
}

}  // namespace kvfleet::router
