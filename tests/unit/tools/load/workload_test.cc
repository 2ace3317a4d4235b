#include "tools/load/workload.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/temp_dir.h"

namespace kvfleet::load {
namespace {

TEST(WorkloadTest, ParsesJsonl) {
  const std::string text =
      "{\"prompt_token_ids\":[1,2,3],\"max_tokens\":64,\"temperature\":0,\"seed\":7,\"ignore_eos\":true}\n"
      "\n"
      "  {\"max_tokens\": 5, \"prompt_token_ids\": [9], \"temperature\": 0.5}  \n";
  absl::StatusOr<std::vector<LoadRequest>> requests = ParseWorkloadJsonl(text);
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 2u);
  const LoadRequest& a = (*requests)[0];
  EXPECT_EQ(a.prompt_token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(a.max_tokens, 64);
  EXPECT_EQ(a.temperature, 0.0f);
  EXPECT_EQ(a.seed, 7u);
  EXPECT_TRUE(a.ignore_eos);
  const LoadRequest& b = (*requests)[1];
  EXPECT_EQ(b.prompt_token_ids, (std::vector<int32_t>{9}));
  EXPECT_EQ(b.max_tokens, 5);
  EXPECT_FLOAT_EQ(b.temperature, 0.5f);
  EXPECT_EQ(b.seed, std::nullopt);
  EXPECT_FALSE(b.ignore_eos);
}

// Each bad line is preceded by one good line, so errors must say "line 2".
TEST(WorkloadTest, ErrorsNameTheLineAndTheField) {
  const std::string good = "{\"prompt_token_ids\":[1],\"max_tokens\":1}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"prompt_token_ids\":[1],\"max_tokens\":0}", "max_tokens"},
      {"{\"prompt_token_ids\":[1],\"max_tokens\":2.5}", "max_tokens"},
      {"{\"prompt_token_ids\":[1],\"max_tokens\":4294967296}", "max_tokens"},
      {"{\"prompt_token_ids\":[1]}", "max_tokens"},
      {"{\"max_tokens\":3}", "prompt_token_ids"},
      {"{\"prompt_token_ids\":[],\"max_tokens\":3}", "prompt_token_ids"},
      {"{\"prompt_token_ids\":[1,-2],\"max_tokens\":3}", "prompt_token_ids"},
      {"{\"prompt_token_ids\":[1,\"a\"],\"max_tokens\":3}", "prompt_token_ids"},
      {"{\"prompt_token_ids\":[1],\"max_tokens\":3,\"temperature\":-1}", "temperature"},
      {"{\"prompt_token_ids\":[1],\"max_tokens\":3,\"seed\":-1}", "seed"},
      {"{\"prompt_token_ids\":[1],\"max_tokens\":3,\"ignore_eos\":1}", "ignore_eos"},
      {"{\"prompt_token_ids\":[1],\"max_tokens\":3,\"max_token\":3}", "max_token"},
      {"{\"prompt_token_ids\":[1],", "JSON"},
      {"[1,2]", "object"},
  };
  for (const auto& [line, field] : cases) {
    absl::StatusOr<std::vector<LoadRequest>> requests = ParseWorkloadJsonl(good + line + "\n");
    ASSERT_FALSE(requests.ok()) << line;
    const std::string message(requests.status().message());
    EXPECT_EQ(message.rfind("line 2: ", 0), 0u) << message;
    EXPECT_NE(message.find(field), std::string::npos) << message;
  }
}

TEST(WorkloadTest, ReadsAFile) {
  testing::TempDir dir;
  const std::string path = dir.Path("w.jsonl");
  std::ofstream(path) << "{\"prompt_token_ids\":[4,5],\"max_tokens\":8}\n";
  absl::StatusOr<std::vector<LoadRequest>> requests = ReadWorkloadFile(path);
  ASSERT_TRUE(requests.ok()) << requests.status();
  EXPECT_EQ(requests->size(), 1u);

  std::ofstream(dir.Path("empty.jsonl")) << "\n";
  EXPECT_FALSE(ReadWorkloadFile(dir.Path("empty.jsonl")).ok());
  EXPECT_TRUE(absl::IsNotFound(ReadWorkloadFile(dir.Path("missing.jsonl")).status()));
}

GeneratorOptions Options() {
  return {.num_requests = 20,
          .prompt_tokens = 50,
          .shared_prefix_tokens = 16,
          .max_tokens = 7,
          .vocab_size = 1000,
          .seed = 42,
          .temperature = 0.5f,
          .ignore_eos = true};
}

TEST(WorkloadTest, GeneratorIsDeterministic) {
  absl::StatusOr<std::vector<LoadRequest>> a = GenerateWorkload(Options());
  absl::StatusOr<std::vector<LoadRequest>> b = GenerateWorkload(Options());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 20u);
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].prompt_token_ids, (*b)[i].prompt_token_ids);
    EXPECT_EQ((*a)[i].seed, 42u + i);
    EXPECT_EQ((*a)[i].max_tokens, 7);
    EXPECT_EQ((*a)[i].temperature, 0.5f);
    EXPECT_TRUE((*a)[i].ignore_eos);
  }
  GeneratorOptions other = Options();
  other.seed = 43;
  absl::StatusOr<std::vector<LoadRequest>> c = GenerateWorkload(other);
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*c)[0].prompt_token_ids, (*a)[0].prompt_token_ids);
}

TEST(WorkloadTest, GeneratorSharesExactlyThePrefix) {
  absl::StatusOr<std::vector<LoadRequest>> generated = GenerateWorkload(Options());
  ASSERT_TRUE(generated.ok()) << generated.status();
  const std::vector<LoadRequest>& requests = *generated;
  const std::vector<int32_t>& first = requests[0].prompt_token_ids;
  for (const LoadRequest& r : requests) {
    ASSERT_EQ(r.prompt_token_ids.size(), 50u);
    EXPECT_TRUE(std::equal(first.begin(), first.begin() + 16, r.prompt_token_ids.begin()));
    for (int32_t id : r.prompt_token_ids) {
      EXPECT_GE(id, 100);
      EXPECT_LT(id, 1000);
    }
  }
  // Past the prefix, prompts differ (50 - 16 random tokens each).
  EXPECT_NE(requests[0].prompt_token_ids, requests[1].prompt_token_ids);
}

TEST(WorkloadTest, GeneratorWorksWithATinyVocabulary) {
  GeneratorOptions options = Options();
  options.vocab_size = 32;
  absl::StatusOr<std::vector<LoadRequest>> requests = GenerateWorkload(options);
  ASSERT_TRUE(requests.ok()) << requests.status();
  for (const LoadRequest& r : *requests) {
    for (int32_t id : r.prompt_token_ids) {
      EXPECT_GE(id, 16);
      EXPECT_LT(id, 32);
    }
  }
}

TEST(WorkloadTest, GeneratorRejectsBadOptions) {
  GeneratorOptions o = Options();
  o.shared_prefix_tokens = 51;
  EXPECT_FALSE(GenerateWorkload(o).ok());
  o = Options();
  o.vocab_size = 0;
  EXPECT_FALSE(GenerateWorkload(o).ok());
  o = Options();
  o.num_requests = 0;
  EXPECT_FALSE(GenerateWorkload(o).ok());
  o = Options();
  o.max_tokens = 0;
  EXPECT_FALSE(GenerateWorkload(o).ok());
}

}  // namespace
}  // namespace kvfleet::load
