#include "services/limits/request_limits.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/generation_bounds.h"

namespace kvfleet::limits {
namespace {

absl::Status Over(const std::string& what, int64_t value, const std::string& unit, int64_t limit,
                  const std::string& flag) {
  return absl::InvalidArgumentError(absl::StrCat(what, " is ", value, unit, "; the limit is ", limit, unit,
                                                 " (the server's --", flag, ")"));
}

template <typename T>
absl::StatusOr<T> Read(const flags::Flags& f, const std::string& name, T fallback, int64_t highest) {
  ASSIGN_OR_RETURN(int64_t value, f.GetInt(name, fallback));
  if (value < 0 || value > highest) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " ", value, " must be in [0, ", highest, "]"));
  }
  return static_cast<T>(value);
}

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

}  // namespace

std::set<std::string> WithLimitFlags(std::set<std::string> own) {
  own.insert({"max-prompt-tokens", "max-output-tokens", "max-stop-strings", "max-stop-string-bytes",
              "max-stop-token-ids", "max-top-logprobs", "max-request-id-bytes", "max-cache-salt-bytes", "max-priority",
              "max-chat-messages", "max-prompt-bytes"});
  return own;
}

absl::StatusOr<RequestLimits> ParseRequestLimits(const flags::Flags& f) {
  RequestLimits l;
  ASSIGN_OR_RETURN(l.max_prompt_tokens, Read<int64_t>(f, "max-prompt-tokens", l.max_prompt_tokens, kInt32Max));
  ASSIGN_OR_RETURN(l.max_output_tokens, Read<int32_t>(f, "max-output-tokens", l.max_output_tokens, kInt32Max));
  ASSIGN_OR_RETURN(l.max_stop_strings, Read<int32_t>(f, "max-stop-strings", l.max_stop_strings, 256));
  ASSIGN_OR_RETURN(l.max_stop_string_bytes, Read<int32_t>(f, "max-stop-string-bytes", l.max_stop_string_bytes, 4096));
  ASSIGN_OR_RETURN(l.max_stop_token_ids,
                   Read<int32_t>(f, "max-stop-token-ids", l.max_stop_token_ids, kMaxStopTokenIds));
  ASSIGN_OR_RETURN(l.max_top_logprobs, Read<int32_t>(f, "max-top-logprobs", l.max_top_logprobs, kMaxTopLogprobs));
  ASSIGN_OR_RETURN(l.max_request_id_bytes, Read<int32_t>(f, "max-request-id-bytes", l.max_request_id_bytes, 4096));
  ASSIGN_OR_RETURN(l.max_cache_salt_bytes, Read<int32_t>(f, "max-cache-salt-bytes", l.max_cache_salt_bytes, 4096));
  ASSIGN_OR_RETURN(l.max_priority, Read<int32_t>(f, "max-priority", l.max_priority, kInt32Max));
  ASSIGN_OR_RETURN(l.max_chat_messages, Read<int32_t>(f, "max-chat-messages", l.max_chat_messages, kInt32Max));
  ASSIGN_OR_RETURN(l.max_prompt_bytes, Read<int64_t>(f, "max-prompt-bytes", l.max_prompt_bytes, kInt32Max));
  return l;
}

std::string LimitsUsage() {
  const RequestLimits d;
  return absl::StrCat(
      "Request limits (over one: INVALID_ARGUMENT naming it; docs/security.md, Limits and quotas):\n",
      "  --max-prompt-tokens N        prompt tokens (default 0: the model's context less one)\n",
      "  --max-output-tokens N        max_tokens (default 0: the model's context); prompt + max_tokens must\n",
      "                               also fit in the context\n",
      "  --max-stop-strings N         stop strings per request (default ", d.max_stop_strings, ")\n",
      "  --max-stop-string-bytes N    bytes per stop string (default ", d.max_stop_string_bytes, ")\n",
      "  --max-stop-token-ids N       stop token ids per request (default ", d.max_stop_token_ids, ", at most ",
      kMaxStopTokenIds, ")\n",
      "  --max-top-logprobs N         top_logprobs (default ", d.max_top_logprobs, ", at most ", kMaxTopLogprobs,
      ")\n",
      "  --max-request-id-bytes N     request_id bytes (default ", d.max_request_id_bytes, ")\n",
      "  --max-cache-salt-bytes N     cache_salt bytes (default ", d.max_cache_salt_bytes, ")\n",
      "  --max-priority N             priority in [-N, N] (default ", d.max_priority, ")\n",
      "  --max-chat-messages N        messages per chat request (default ", d.max_chat_messages, ")\n",
      "  --max-prompt-bytes N         a text prompt's bytes, or a chat's contents together (default ",
      d.max_prompt_bytes, ")\n");
}

absl::Status CheckGeneration(const RequestLimits& l, const GenerationFields& g) {
  if (g.request_id.size() > static_cast<size_t>(l.max_request_id_bytes)) {
    return Over("request_id", g.request_id.size(), " bytes", l.max_request_id_bytes, "max-request-id-bytes");
  }
  if (g.session_id.size() > static_cast<size_t>(l.max_request_id_bytes)) {
    return Over("session_id", g.session_id.size(), " bytes", l.max_request_id_bytes, "max-request-id-bytes");
  }
  if (g.cache_salt.size() > static_cast<size_t>(l.max_cache_salt_bytes)) {
    return Over("cache_salt", g.cache_salt.size(), " bytes", l.max_cache_salt_bytes, "max-cache-salt-bytes");
  }
  if (g.priority > l.max_priority || g.priority < -static_cast<int64_t>(l.max_priority)) {
    return absl::InvalidArgumentError(absl::StrCat("priority is ", g.priority, "; it must be in [-", l.max_priority,
                                                   ", ", l.max_priority, "] (the server's --max-priority)"));
  }
  if (g.stopping->stop_token_ids_size() > l.max_stop_token_ids) {
    return Over("stop_token_ids", g.stopping->stop_token_ids_size(), " ids", l.max_stop_token_ids,
                "max-stop-token-ids");
  }
  if (g.stopping->max_tokens() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens is ", g.stopping->max_tokens(), "; give a positive count, or 0 for the rest of the context"));
  }
  if (g.top_logprobs < 0 || g.top_logprobs > l.max_top_logprobs) {
    return absl::InvalidArgumentError(absl::StrCat("top_logprobs is ", g.top_logprobs, "; it must be in [0, ",
                                                   l.max_top_logprobs, "] (the server's --max-top-logprobs)"));
  }
  return absl::OkStatus();
}

absl::Status CheckLength(const RequestLimits& l, int64_t prompt_tokens, int32_t max_tokens, int64_t context_length) {
  if (l.max_prompt_tokens > 0 && prompt_tokens > l.max_prompt_tokens) {
    return Over("the prompt", prompt_tokens, " tokens", l.max_prompt_tokens, "max-prompt-tokens");
  }
  if (prompt_tokens >= context_length) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt is ", prompt_tokens, " tokens; the model's context of ",
                                                   context_length,
                                                   " tokens must hold the prompt and at least one generated token: "
                                                   "shorten the prompt"));
  }
  if (l.max_output_tokens > 0 && max_tokens > l.max_output_tokens) {
    return Over("max_tokens", max_tokens, "", l.max_output_tokens, "max-output-tokens");
  }
  if (max_tokens > 0 && prompt_tokens + max_tokens > context_length) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt is ", prompt_tokens, " tokens and max_tokens is ",
                                                   max_tokens, ": ", prompt_tokens + max_tokens,
                                                   " exceeds the model's context of ", context_length,
                                                   " tokens; shorten the prompt or lower max_tokens"));
  }
  return absl::OkStatus();
}

absl::Status CheckStopStrings(const RequestLimits& l, const google::protobuf::RepeatedPtrField<std::string>& stop) {
  if (stop.size() > l.max_stop_strings) return Over("stop", stop.size(), " strings", l.max_stop_strings, "max-stop-strings");
  for (int i = 0; i < stop.size(); ++i) {
    if (stop[i].size() > static_cast<size_t>(l.max_stop_string_bytes)) {
      return Over(absl::StrCat("stop[", i, "]"), stop[i].size(), " bytes", l.max_stop_string_bytes,
                  "max-stop-string-bytes");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPromptBytes(const RequestLimits& l, std::string_view field, int64_t bytes) {
  if (bytes > l.max_prompt_bytes) return Over(std::string(field), bytes, " bytes", l.max_prompt_bytes, "max-prompt-bytes");
  return absl::OkStatus();
}

absl::Status CheckChatMessages(const RequestLimits& l, int64_t count) {
  if (count > l.max_chat_messages) return Over("messages", count, " messages", l.max_chat_messages, "max-chat-messages");
  return absl::OkStatus();
}

}  // namespace kvfleet::limits
