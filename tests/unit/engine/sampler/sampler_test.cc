#include "engine/sampler/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "engine/sampler/philox.h"

namespace kvfleet::engine {
namespace {

std::vector<float> Logits() { return {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f}; }

TEST(SamplerTest, GreedyPicksArgmaxWithLowestIdOnTies) {
  Sampler s({.temperature = 0.0f}, 1, {});
  EXPECT_EQ(s.Sample(Logits(), 0), 1);
}

TEST(SamplerTest, SeededSamplingIsAPureFunctionOfSeedAndPosition) {
  const SamplingParams p{.temperature = 1.0f};
  Sampler a(p, 42, {}), b(p, 42, {});
  for (int pos = 0; pos < 50; ++pos) EXPECT_EQ(a.Sample(Logits(), pos), b.Sample(Logits(), pos));
  Sampler c(p, 43, {});
  int differ = 0;
  for (int pos = 0; pos < 50; ++pos) differ += a.Sample(Logits(), pos) != c.Sample(Logits(), pos);
  EXPECT_GT(differ, 0);
}

TEST(SamplerTest, SamplingFollowsTheSoftmaxDistribution) {
  // 20,000 draws; each frequency within 5 standard errors (false failure
  // rate well under 1e-5 per token).
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  const SamplingParams p{.temperature = 1.0f};
  Sampler s(p, 7, {});
  std::map<int, int> counts;
  const int n = 20000;
  for (int pos = 0; pos < n; ++pos) counts[s.Sample(logits, pos)]++;
  const double z = std::exp(0.0) + std::exp(1.0) + std::exp(2.0);
  for (int t = 0; t < 3; ++t) {
    const double prob = std::exp(static_cast<double>(t)) / z;
    const double se = std::sqrt(prob * (1 - prob) / n);
    EXPECT_NEAR(counts[t] / static_cast<double>(n), prob, 5 * se) << "token " << t;
  }
}

TEST(SamplerTest, TopKTopPAndMinPRestrictTheCandidates) {
  const std::vector<float> logits = {5.0f, 4.9f, 1.0f, 0.0f, -3.0f};
  for (int pos = 0; pos < 500; ++pos) {
    EXPECT_LT(Sampler({.temperature = 1.0f, .top_k = 2}, 3, {}).Sample(logits, pos), 2);
    EXPECT_LT(Sampler({.temperature = 1.0f, .top_p = 0.5f}, 3, {}).Sample(logits, pos), 1);
    EXPECT_LT(Sampler({.temperature = 1.0f, .min_p = 0.5f}, 3, {}).Sample(logits, pos), 2);
  }
}

TEST(SamplerTest, PenaltiesDiscourageRepeats) {
  const std::vector<float> logits = {2.0f, 1.9f, 0.0f};
  const std::vector<model::TokenId> prompt = {0};
  EXPECT_EQ(Sampler({.temperature = 0.0f}, 1, prompt).Sample(logits, 1), 0);
  EXPECT_EQ(Sampler({.temperature = 0.0f, .repetition_penalty = 1.2f}, 1, prompt).Sample(logits, 1), 1);
  Sampler s({.temperature = 0.0f, .presence_penalty = 0.5f}, 1, prompt);
  EXPECT_EQ(s.Sample(logits, 1), 0);  // presence counts output tokens only
  s.Accept(0);
  EXPECT_EQ(s.Sample(logits, 2), 1);
  Sampler f({.temperature = 0.0f, .frequency_penalty = 0.06f}, 1, {});
  f.Accept(0);
  EXPECT_EQ(f.Sample(logits, 1), 0);  // 2.0 − 0.06 > 1.9
  f.Accept(0);
  EXPECT_EQ(f.Sample(logits, 2), 1);  // 2.0 − 0.12 < 1.9
}

TEST(SamplingParamsTest, InvalidParametersNameTheField) {
  struct Case {
    SamplingParams p;
    const char* field;
  };
  for (const Case& c : {Case{{.temperature = -0.5f}, "temperature"}, Case{{.temperature = NAN}, "temperature"},
                        Case{{.top_k = -1}, "top_k"}, Case{{.top_p = 0.0f}, "top_p"}, Case{{.top_p = 1.5f}, "top_p"},
                        Case{{.min_p = -0.1f}, "min_p"}, Case{{.repetition_penalty = 0.0f}, "repetition_penalty"},
                        Case{{.presence_penalty = 3.0f}, "presence_penalty"},
                        Case{{.frequency_penalty = -2.5f}, "frequency_penalty"}}) {
    const absl::Status s = c.p.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s;
  }
  EXPECT_TRUE(SamplingParams{}.Validate().ok());
}

TEST(StoppingParamsTest, BoundsAreChecked) {
  EXPECT_NE(StoppingParams{.max_tokens = 0}.Validate(10).message().find("max_tokens"), std::string::npos);
  EXPECT_NE(StoppingParams{.stop_token_ids = {11}}.Validate(10).message().find("stop_token_ids"),
            std::string::npos);
  StoppingParams many;
  many.stop_token_ids.assign(kMaxStopTokenIds + 1, 1);
  EXPECT_EQ(many.Validate(10).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(StoppingParams{.stop_token_ids = {9}}.Validate(10).ok());
}

TEST(PhiloxTest, KnownAnswerAndUniformRange) {
  // Known-answer vector from the Random123 distribution (kat_vectors):
  // philox4x32_10, counter and key all zero.
  const auto r = Philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
  for (uint64_t i = 0; i < 1000; ++i) {
    const double u = UniformAt(9, i, 0);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace kvfleet::engine
