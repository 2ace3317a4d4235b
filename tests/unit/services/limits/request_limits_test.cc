#include "services/limits/request_limits.h"

#include <gtest/gtest.h>

#include <functional>

namespace kvfleet::limits {
namespace {

// Each case: a limit lowered to `limit`, and a check that sends `value`.
// At the limit it passes; one over, INVALID_ARGUMENT naming the field, the
// value and the flag.
struct Case {
  const char* flag;
  const char* field;
  std::function<void(RequestLimits&, int64_t)> set_limit;
  std::function<absl::Status(const RequestLimits&, int64_t)> check;
};

absl::Status Generation(const RequestLimits& l, const GenerationFields& g) { return CheckGeneration(l, g); }

std::vector<Case> Cases() {
  static v1::StoppingParams stopping;
  return {
      {"max-request-id-bytes", "request_id", [](RequestLimits& l, int64_t n) { l.max_request_id_bytes = n; },
       [](const RequestLimits& l, int64_t n) {
         const std::string id(n, 'r');
         return Generation(l, {.request_id = id, .stopping = &stopping});
       }},
      {"max-cache-salt-bytes", "cache_salt", [](RequestLimits& l, int64_t n) { l.max_cache_salt_bytes = n; },
       [](const RequestLimits& l, int64_t n) {
         const std::string salt(n, 's');
         return Generation(l, {.cache_salt = salt, .stopping = &stopping});
       }},
      {"max-priority", "priority", [](RequestLimits& l, int64_t n) { l.max_priority = n; },
       [](const RequestLimits& l, int64_t n) {
         return Generation(l, {.priority = static_cast<int32_t>(-n), .stopping = &stopping});
       }},
      {"max-stop-token-ids", "stop_token_ids", [](RequestLimits& l, int64_t n) { l.max_stop_token_ids = n; },
       [](const RequestLimits& l, int64_t n) {
         v1::StoppingParams s;
         for (int64_t i = 0; i < n; ++i) s.add_stop_token_ids(1);
         return Generation(l, {.stopping = &s});
       }},
      {"max-top-logprobs", "top_logprobs", [](RequestLimits& l, int64_t n) { l.max_top_logprobs = n; },
       [](const RequestLimits& l, int64_t n) {
         return Generation(l, {.stopping = &stopping, .top_logprobs = static_cast<int32_t>(n)});
       }},
      {"max-prompt-tokens", "the prompt", [](RequestLimits& l, int64_t n) { l.max_prompt_tokens = n; },
       [](const RequestLimits& l, int64_t n) { return CheckLength(l, n, 1, 1000); }},
      {"max-output-tokens", "max_tokens", [](RequestLimits& l, int64_t n) { l.max_output_tokens = n; },
       [](const RequestLimits& l, int64_t n) { return CheckLength(l, 1, n, 1000); }},
      {"max-stop-strings", "stop", [](RequestLimits& l, int64_t n) { l.max_stop_strings = n; },
       [](const RequestLimits& l, int64_t n) {
         google::protobuf::RepeatedPtrField<std::string> stop;
         for (int64_t i = 0; i < n; ++i) *stop.Add() = "x";
         return CheckStopStrings(l, stop);
       }},
      {"max-stop-string-bytes", "stop[1]", [](RequestLimits& l, int64_t n) { l.max_stop_string_bytes = n; },
       [](const RequestLimits& l, int64_t n) {
         google::protobuf::RepeatedPtrField<std::string> stop;
         *stop.Add() = "x";
         *stop.Add() = std::string(n, 'y');
         return CheckStopStrings(l, stop);
       }},
      {"max-chat-messages", "messages", [](RequestLimits& l, int64_t n) { l.max_chat_messages = n; },
       [](const RequestLimits& l, int64_t n) { return CheckChatMessages(l, n); }},
      {"max-prompt-bytes", "prompt", [](RequestLimits& l, int64_t n) { l.max_prompt_bytes = n; },
       [](const RequestLimits& l, int64_t n) { return CheckPromptBytes(l, "prompt", n); }},
  };
}

TEST(RequestLimitsTest, EachLimitPassesAtItsValueAndRefusesOneOverNamingIt) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.flag);
    RequestLimits l;
    c.set_limit(l, 7);
    EXPECT_TRUE(c.check(l, 7).ok()) << c.check(l, 7);
    const absl::Status over = c.check(l, 8);
    EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(over.message().find(c.field), std::string::npos) << over;
    EXPECT_NE(over.message().find("8"), std::string::npos) << over;
    EXPECT_NE(over.message().find("7"), std::string::npos) << over;
    EXPECT_NE(over.message().find(std::string("--") + c.flag), std::string::npos) << over;
  }
}

TEST(RequestLimitsTest, ThePromptAndMaxTokensMustFitTheContextTogether) {
  const RequestLimits l;
  EXPECT_TRUE(CheckLength(l, 90, 10, 100).ok());
  const absl::Status over = CheckLength(l, 90, 11, 100);
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("101 exceeds the model's context of 100"), std::string::npos) << over;
  // max_tokens 0 is "the rest of the context": only the prompt must leave room.
  EXPECT_TRUE(CheckLength(l, 99, 0, 100).ok());
  EXPECT_EQ(CheckLength(l, 100, 0, 100).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestLimitsTest, NegativeCountsAreRefused) {
  const RequestLimits l;
  v1::StoppingParams s;
  s.set_max_tokens(-1);
  EXPECT_NE(CheckGeneration(l, {.stopping = &s}).message().find("max_tokens is -1"), std::string::npos);
  v1::StoppingParams fine;
  EXPECT_EQ(CheckGeneration(l, {.stopping = &fine, .top_logprobs = -1}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestLimitsTest, FlagsSetTheLimitsAndRefuseWhatTheEngineCannotCompute) {
  auto parse = [](std::vector<std::string> args) {
    absl::StatusOr<flags::Flags> f = flags::Flags::Parse(args, WithLimitFlags({}), {});
    EXPECT_TRUE(f.ok()) << f.status();
    return ParseRequestLimits(*f);
  };
  absl::StatusOr<RequestLimits> l = parse({"--max-chat-messages", "3", "--max-priority", "5"});
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_chat_messages, 3);
  EXPECT_EQ(l->max_priority, 5);
  EXPECT_EQ(l->max_stop_strings, 16);  // untouched: the default
  EXPECT_NE(parse({"--max-top-logprobs", "21"}).status().message().find("--max-top-logprobs 21"), std::string::npos);
  EXPECT_FALSE(parse({"--max-stop-token-ids", "65"}).ok());
  EXPECT_FALSE(parse({"--max-prompt-bytes", "-1"}).ok());
  EXPECT_NE(LimitsUsage().find("--max-cache-salt-bytes"), std::string::npos);
}

}  // namespace
}  // namespace kvfleet::limits
