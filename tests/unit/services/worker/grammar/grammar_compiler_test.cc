// GrammarCompiler on the default model's real vocabulary: what each kind of
// constraint allows token by token, the compile cache, errors that name the
// problem, and that a mask prepared ahead (as the engine does during the
// forward pass) is the mask computed on demand. Skipped when the model has
// not been fetched.
#include "services/worker/grammar/grammar_compiler.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_vocabulary.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/testing/default_model.h"

namespace kvfleet::worker {
namespace {

using ::testing::HasSubstr;

class GrammarCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kvfleet::testing::DefaultModelFetched()) GTEST_SKIP() << kvfleet::testing::kDefaultModelMissing;
    absl::StatusOr<std::unique_ptr<model::GgufFile>> file = model::GgufFile::Open(kvfleet::testing::kDefaultModelPath);
    ASSERT_TRUE(file.ok()) << file.status();
    absl::StatusOr<model::Vocabulary> vocab = model::ReadGgufVocabulary(**file);
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    vocab_ = *std::move(vocab);
    absl::StatusOr<std::unique_ptr<model::Tokenizer>> tok = model::CreateTokenizer(vocab_);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = *std::move(tok);
    vocab_size_ = tok_->vocab_size();
    absl::StatusOr<std::unique_ptr<GrammarCompiler>> compiler =
        GrammarCompiler::Create(*tok_, vocab_size_, [this](double) { ++masks_filled_; });
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = *std::move(compiler);
  }

  std::vector<model::TokenId> Encode(std::string_view text) {
    absl::StatusOr<std::vector<model::TokenId>> ids = tok_->Encode(text, {});
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<model::TokenId>{};
  }

  // The tokens the constraint allows next.
  std::vector<bool> Allowed(engine::TokenConstraint& c) {
    std::vector<float> logits(static_cast<size_t>(vocab_size_), 0.0f);
    c.MaskLogits(logits);
    std::vector<bool> allowed(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) allowed[i] = std::isfinite(logits[i]);
    return allowed;
  }

  std::shared_ptr<engine::TokenConstraint> Constraint(const v1::OutputConstraint& c) {
    absl::StatusOr<std::shared_ptr<engine::TokenConstraint>> constraint = compiler_->NewConstraint(c);
    EXPECT_TRUE(constraint.ok()) << constraint.status();
    return constraint.ok() ? *constraint : nullptr;
  }

  model::TokenId Stop() const { return tok_->StopTokens().front(); }

  model::Vocabulary vocab_;
  std::unique_ptr<model::Tokenizer> tok_;
  int32_t vocab_size_ = 0;
  int64_t masks_filled_ = 0;
  std::unique_ptr<GrammarCompiler> compiler_;
};

v1::OutputConstraint Choice(std::vector<std::string> choices) {
  v1::OutputConstraint c;
  c.mutable_choice();  // set even when the list is empty
  for (std::string& s : choices) c.mutable_choice()->add_choices(std::move(s));
  return c;
}

v1::OutputConstraint Regex(std::string regex) {
  v1::OutputConstraint c;
  c.set_regex(std::move(regex));
  return c;
}

v1::OutputConstraint Schema(std::string schema) {
  v1::OutputConstraint c;
  c.set_json_schema(std::move(schema));
  return c;
}

TEST_F(GrammarCompilerTest, AChoiceAllowsItsTokensThenOnlyTheEnd) {
  std::shared_ptr<engine::TokenConstraint> c = Constraint(Choice({"Paris", "London"}));
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(Allowed(*c)[static_cast<size_t>(Stop())]) << "an empty answer is not a choice";
  EXPECT_FALSE(Allowed(*c)[static_cast<size_t>(Encode("Berlin").front())]);
  for (model::TokenId t : Encode("Paris")) {
    ASSERT_TRUE(Allowed(*c)[static_cast<size_t>(t)]) << tok_->TokenToPiece(t).value_or("?");
    ASSERT_TRUE(c->Accept(t));
  }
  const std::vector<bool> after = Allowed(*c);
  EXPECT_TRUE(after[static_cast<size_t>(Stop())]);
  EXPECT_EQ(std::count(after.begin(), after.end(), true), static_cast<int64_t>(tok_->StopTokens().size()));
  EXPECT_TRUE(c->Accept(Stop()));
}

// JSON mode (response_format json_object) answers with an object, as
// OpenAI's does: an array or a bare value is not a start.
TEST_F(GrammarCompilerTest, JsonObjectModeStartsOnlyAnObject) {
  v1::OutputConstraint object;
  object.set_json_object(true);
  std::shared_ptr<engine::TokenConstraint> c = Constraint(object);
  ASSERT_NE(c, nullptr);
  const std::vector<bool> first = Allowed(*c);
  EXPECT_TRUE(first[static_cast<size_t>(Encode("{").front())]);
  for (const char* not_an_object : {"[", "1", "\"", "true", "null"}) {
    EXPECT_FALSE(first[static_cast<size_t>(Encode(not_an_object).front())]) << not_an_object;
  }
  for (model::TokenId t : Encode(R"({"a": [1, 2]})")) ASSERT_TRUE(c->Accept(t)) << tok_->TokenToPiece(t).value_or("?");
  EXPECT_TRUE(Allowed(*c)[static_cast<size_t>(Stop())]);
}

TEST_F(GrammarCompilerTest, AForbiddenTokenIsRefusedByAccept) {
  std::shared_ptr<engine::TokenConstraint> c = Constraint(Regex("[0-9]+"));
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->Accept(Encode("abc").front()));
}

TEST_F(GrammarCompilerTest, APreparedMaskIsTheMaskComputedOnDemand) {
  std::shared_ptr<engine::TokenConstraint> ahead = Constraint(Regex("[0-9]{3}-[a-z]+ ok"));
  std::shared_ptr<engine::TokenConstraint> on_demand = Constraint(Regex("[0-9]{3}-[a-z]+ ok"));
  ASSERT_NE(ahead, nullptr);
  ASSERT_NE(on_demand, nullptr);
  const std::vector<model::TokenId> tokens = Encode("123-abc ok");
  masks_filled_ = 0;
  for (model::TokenId t : tokens) {
    ahead->PrepareMask();
    EXPECT_EQ(Allowed(*ahead), Allowed(*on_demand));
    ASSERT_TRUE(ahead->Accept(t));
    ASSERT_TRUE(on_demand->Accept(t));
  }
  // A prepared mask is used, not filled again; one the state moved past is.
  EXPECT_EQ(masks_filled_, 2 * static_cast<int64_t>(tokens.size()));
}

TEST_F(GrammarCompilerTest, AStalePreparedMaskIsNotUsed) {
  std::shared_ptr<engine::TokenConstraint> c = Constraint(Choice({"ab"}));
  ASSERT_NE(c, nullptr);
  const std::vector<model::TokenId> tokens = Encode("ab");
  c->PrepareMask();
  ASSERT_TRUE(c->Accept(tokens.front()));
  // After the accept, the prepared mask (for the first token) is stale.
  const std::vector<bool> allowed = Allowed(*c);
  if (tokens.size() == 1) {
    EXPECT_TRUE(allowed[static_cast<size_t>(Stop())]);
  } else {
    EXPECT_TRUE(allowed[static_cast<size_t>(tokens[1])]);
    EXPECT_FALSE(allowed[static_cast<size_t>(tokens[0])] && tokens[0] != tokens[1]);
  }
}

v1::OutputConstraint TriggeredWeatherCalls() {
  v1::OutputConstraint c;
  v1::ToolCallConstraint& calls = *c.mutable_tool_calls();
  calls.set_format("hermes");
  calls.set_triggered(true);
  v1::ToolSchema& tool = *calls.add_tools();
  tool.set_name("get_weather");
  tool.set_parameters_json(
      R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false})");
  return c;
}

// Accepts `text` token by token; the number of tokens accepted.
size_t AcceptAll(engine::TokenConstraint& c, const std::vector<model::TokenId>& tokens) {
  size_t n = 0;
  while (n < tokens.size() && c.Accept(tokens[n])) ++n;
  return n;
}

TEST_F(GrammarCompilerTest, ATriggeredToolCallIsFreeTextUntilACallStarts) {
  std::shared_ptr<engine::TokenConstraint> prose = Constraint(TriggeredWeatherCalls());
  ASSERT_NE(prose, nullptr);
  const std::vector<model::TokenId> text = Encode("It is sunny in Paris today, I think.");
  EXPECT_EQ(AcceptAll(*prose, text), text.size());
  EXPECT_TRUE(Allowed(*prose)[static_cast<size_t>(Stop())]) << "prose may end anywhere";

  std::shared_ptr<engine::TokenConstraint> call = Constraint(TriggeredWeatherCalls());
  const std::vector<model::TokenId> valid =
      Encode("Let me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  EXPECT_EQ(AcceptAll(*call, valid), valid.size());
  EXPECT_TRUE(Allowed(*call)[static_cast<size_t>(Stop())]);

  // Inside a call: an unknown tool, or arguments off the schema, are refused.
  for (const char* bad : {"<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
                          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Paris\"}}\n</tool_call>"}) {
    std::shared_ptr<engine::TokenConstraint> c = Constraint(TriggeredWeatherCalls());
    const std::vector<model::TokenId> tokens = Encode(bad);
    EXPECT_LT(AcceptAll(*c, tokens), tokens.size()) << bad;
  }
}

TEST_F(GrammarCompilerTest, ARepeatedConstraintCompilesOnce) {
  const GrammarStats before = compiler_->stats();
  for (int i = 0; i < 3; ++i)
    ASSERT_NE(Constraint(Schema(R"({"type": "object", "properties": {"n": {"type": "integer"}}})")), nullptr);
  const GrammarStats after = compiler_->stats();
  EXPECT_EQ(after.compiles - before.compiles, 1);
  EXPECT_EQ(after.cache_hits - before.cache_hits, 2);
}

TEST_F(GrammarCompilerTest, ErrorsNameTheProblem) {
  auto error = [&](const v1::OutputConstraint& c) {
    absl::StatusOr<std::shared_ptr<engine::TokenConstraint>> r = compiler_->NewConstraint(c);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    return std::string(r.status().message());
  };
  EXPECT_THAT(error(Schema(R"({"type": "object", "properties": {"a": {"type": "strng"}}})")),
              HasSubstr("$.properties.a.type"));
  EXPECT_THAT(error(Schema("{not json")), HasSubstr("not valid JSON"));
  EXPECT_THAT(error(Regex("[a-")), HasSubstr("cannot be compiled"));
  EXPECT_THAT(error(Choice({})), HasSubstr("choice lists no strings"));
  v1::OutputConstraint grammar;
  grammar.set_grammar("root ::= undefined_rule");
  EXPECT_THAT(error(grammar), HasSubstr("cannot be compiled"));
  v1::OutputConstraint tools;
  tools.mutable_tool_calls()->set_format("mistral");
  tools.mutable_tool_calls()->add_tools()->set_name("f");
  EXPECT_THAT(error(tools), HasSubstr("'mistral' cannot be enforced"));
  EXPECT_THAT(error(v1::OutputConstraint()), HasSubstr("empty"));
}

}  // namespace
}  // namespace kvfleet::worker
