// Why a generation ended. Shared by the engine, the worker API and metrics.
#pragma once

namespace kvfleet::engine {

enum class FinishReason {
  kStop,       // an end-of-turn or stop token
  kLength,     // max_tokens reached
  kCancelled,  // the client went away or asked
  kError,
  kHandoff,  // a prefill_only request's first token: decoding goes on elsewhere
};

constexpr const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
    case FinishReason::kHandoff:
      return "handoff";
  }
  return "?";
}

}  // namespace kvfleet::engine
