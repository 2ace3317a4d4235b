#include "model/tokenizer/chat_template.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvfleet::model {
namespace {

using ::testing::HasSubstr;

// SmolLM2-135M-Instruct's template, as stored in its GGUF (real newlines
// inside the string literals).
constexpr std::string_view kSmolLm2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// Meta-Llama-3-8B-Instruct's template.
constexpr std::string_view kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

// Qwen2's, with \n escapes in the literals as its tokenizer_config.json has them.
constexpr std::string_view kQwen2 =
    R"({% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})";

ChatTemplate MustParse(std::string_view source, ChatTemplateOptions options = {}) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromTemplateSource(source, options);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

std::string MustApply(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool gen) {
  absl::StatusOr<std::string> out = t.Apply(messages, gen);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

TEST(ChatTemplateTest, SmolLm2InsertsItsDefaultSystemPrompt) {
  ChatTemplate t = MustParse(kSmolLm2);
  EXPECT_EQ(t.family(), ChatTemplate::Family::kChatMl);
  EXPECT_EQ(t.default_system_prompt(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(MustApply(t, {{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(MustApply(t, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n");
}

TEST(ChatTemplateTest, EscapedDefaultSystemPrompt) {
  ChatTemplate t = MustParse(kQwen2);
  EXPECT_EQ(t.default_system_prompt(), "You are a helpful assistant.");
}

TEST(ChatTemplateTest, Llama3TrimsContentAndStartsWithBos) {
  ChatTemplate t = MustParse(kLlama3, {.bos_token = "<|begin_of_text|>"});
  EXPECT_EQ(t.family(), ChatTemplate::Family::kLlama3);
  EXPECT_EQ(t.default_system_prompt(), std::nullopt);
  EXPECT_TRUE(t.renders_bos());
  // Python's str.strip() also strips U+3000 and U+001C.
  EXPECT_EQ(MustApply(t, {{"system", " \n Be brief.\t"}, {"user", "\xE3\x80\x80Hi\x1C"}}, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, UnknownTemplatesAreRefused) {
  absl::StatusOr<ChatTemplate> gemma = ChatTemplate::FromTemplateSource(
      "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\n' }}{% endfor %}");
  EXPECT_EQ(gemma.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(gemma.status().message()), HasSubstr("not recognised"));
  EXPECT_THAT(std::string(gemma.status().message()), HasSubstr("ChatML"));
  EXPECT_THAT(std::string(gemma.status().message()), HasSubstr("Llama 3"));
  EXPECT_EQ(ChatTemplate::FromTemplateSource("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, UnsupportedFeaturesAreRefused) {
  absl::StatusOr<ChatTemplate> llama31 = ChatTemplate::FromTemplateSource(
      "{{- '<|start_header_id|>system<|end_header_id|>\n\n' }}{{- 'Cutting Knowledge Date: December 2023\n' }}");
  EXPECT_EQ(llama31.status().code(), absl::StatusCode::kUnimplemented);
  absl::StatusOr<ChatTemplate> qwen3 = ChatTemplate::FromTemplateSource("<|im_start|>{{ '<think>\n' }}");
  EXPECT_EQ(qwen3.status().code(), absl::StatusCode::kUnimplemented);
  ChatTemplate tools = MustParse("{{ '<|im_start|>user\n<tool_response>\n' }}");
  EXPECT_EQ(tools.Apply({{{"tool", "42"}}}, false).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ChatTemplateTest, ValidatesMessages) {
  ChatTemplate t = MustParse(kSmolLm2);
  EXPECT_EQ(t.Apply({}, true).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> bad_role = t.Apply({{{"narrator", "x"}}}, true);
  EXPECT_EQ(bad_role.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_role.status().message()), HasSubstr("narrator"));
  EXPECT_EQ(t.Apply({{{"user", "\xFF"}}}, true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(t.Apply({{{"tool", "42"}}}, true).ok());
}

}  // namespace
}  // namespace kvfleet::model
