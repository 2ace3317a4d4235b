// Speculative decoding end to end on the real default model: a real
// router, cachemanager and worker process, with the n-gram, suffix, self,
// draft and heads (the committed ones trained for this model) proposers loaded. Whatever proposer a request picks (or
// none), the text and tokens are the same; the worker's metrics show the drafting; a proposer the worker does not have
// is refused with a clear status.
#include <gtest/gtest.h>

#include "tests/integration/services/router/router_cluster.h"
#include "tests/testing/default_model.h"

namespace kvfleet::testing {
namespace {

class ClusterSpeculationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!DefaultModelFetched()) return;
    cluster_ = new RouterCluster();
    // Fixed-length drafts, so every proposer drafts whatever the batch; the
    // draft model is the model file itself (its own weights and cache).
    const absl::Status s =
        cluster_->Start({.workers = 1,
                         .model_path = kDefaultModelPath,
                         .worker_args = {"--kv-cache-memory", "128MiB", "--threads", "2", "--speculation", "ngram",
                                         "--no-spec-adaptive", "--spec-max-draft-tokens", "4", "--spec-self-layers",
                                         "24", "--spec-draft-model", kDefaultModelPath, "--spec-draft-heads",
                                         KVFLEET_SOURCE_DIR "/heads/smollm2-135m-instruct-q4_1"}});
    ASSERT_TRUE(s.ok()) << s;
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (!DefaultModelFetched()) GTEST_SKIP() << kDefaultModelMissing;
  }

  static v1::ChatRequest CopyingChat(const std::string& proposer, bool sampled) {
    v1::ChatRequest r;
    v1::ChatMessage* m = r.add_messages();
    m->set_role("user");
    m->set_content(
        "Copy this list exactly: apples, pears, plums, cherries, apricots, peaches, grapes, melons, lemons.");
    v1::GenerationOptions* o = r.mutable_options();
    o->mutable_stopping()->set_max_tokens(40);
    if (sampled) {
      o->mutable_sampling()->set_temperature(0.7f);
      o->mutable_sampling()->set_seed(1234);
    }
    if (!proposer.empty()) o->mutable_speculation()->set_proposer(proposer);
    return r;
  }

  static RouterCluster* cluster_;
};

RouterCluster* ClusterSpeculationTest::cluster_ = nullptr;

TEST_F(ClusterSpeculationTest, EveryProposerGivesTheSameTextAndTheMetricsShowIt) {
  for (bool sampled : {false, true}) {
    const TextStreamResult plain = cluster_->Chat(CopyingChat("off", sampled));
    ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
    ASSERT_GT(plain.tokens.size(), 10u);
    for (const std::string proposer : {"", "ngram", "suffix", "self", "draft", "heads", "auto"}) {
      const TextStreamResult spec = cluster_->Chat(CopyingChat(proposer, sampled));
      ASSERT_TRUE(spec.status.ok()) << proposer << ": " << spec.status.error_message();
      EXPECT_EQ(spec.tokens, plain.tokens) << "proposer '" << proposer << "', sampled " << sampled;
      EXPECT_EQ(spec.text, plain.text) << "proposer '" << proposer << "', sampled " << sampled;
    }
  }
  absl::StatusOr<PrometheusScrape> metrics = cluster_->worker(0).ScrapeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  for (const std::string proposer : {"ngram", "suffix", "self", "draft", "heads"}) {
    const std::optional<double> drafted =
        metrics->Value("kvfleet_worker_spec_draft_tokens_total", {{"proposer", proposer}});
    const std::optional<double> accepted =
        metrics->Value("kvfleet_worker_spec_accepted_tokens_total", {{"proposer", proposer}});
    const std::optional<double> passes =
        metrics->Value("kvfleet_worker_spec_verify_passes_total", {{"proposer", proposer}});
    ASSERT_TRUE(drafted && accepted && passes) << proposer;
    EXPECT_GT(*drafted, 0) << proposer;
    EXPECT_GT(*accepted, 0) << proposer;
    EXPECT_GT(*passes, 0) << proposer;
    EXPECT_TRUE(metrics->Value("kvfleet_worker_spec_acceptance_ratio", {{"proposer", proposer}}).has_value());
    const std::optional<double> speedup =
        metrics->Value("kvfleet_worker_spec_estimated_speedup", {{"proposer", proposer}});
    ASSERT_TRUE(speedup.has_value()) << proposer;
    EXPECT_GT(*speedup, 0) << proposer;
  }
}

// The suffix proposer's store learns from finished requests: asked again
// for an answer it has written, the worker drafts it from the store, and
// nearly every guess is kept; the store's memory is exported.
TEST_F(ClusterSpeculationTest, SuffixDraftsARepeatedAnswerFromTheStore) {
  v1::ChatRequest r;
  v1::ChatMessage* m = r.add_messages();
  m->set_role("user");
  m->set_content("Write two sentences about a lighthouse keeper.");
  r.mutable_options()->mutable_stopping()->set_max_tokens(48);
  r.mutable_options()->mutable_speculation()->set_proposer("suffix");
  const auto counters = [&]() -> std::pair<double, double> {
    absl::StatusOr<PrometheusScrape> metrics = cluster_->worker(0).ScrapeMetrics();
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    if (!metrics.ok()) return {0, 0};
    return {metrics->Value("kvfleet_worker_spec_draft_tokens_total", {{"proposer", "suffix"}}).value_or(0),
            metrics->Value("kvfleet_worker_spec_accepted_tokens_total", {{"proposer", "suffix"}}).value_or(0)};
  };
  const auto [drafted_0, accepted_0] = counters();
  const TextStreamResult first = cluster_->Chat(r);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_GT(first.tokens.size(), 20u);
  const auto [drafted_1, accepted_1] = counters();
  const TextStreamResult again = cluster_->Chat(r);
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_EQ(again.tokens, first.tokens);
  const auto [drafted_2, accepted_2] = counters();
  // Drafts of 4 (fixed): at most 4 of every 5 tokens come from guesses.
  // Only the first pass (the reply's start, not in any stored output) and
  // the last (cut by max_tokens) may miss.
  const double accepted_first = accepted_1 - accepted_0;
  const double accepted_again = accepted_2 - accepted_1;
  EXPECT_GT(accepted_again, accepted_first);
  EXPECT_GE(accepted_again, 0.6 * static_cast<double>(first.tokens.size()));
  EXPECT_GE(accepted_again, 0.8 * (drafted_2 - drafted_1));

  absl::StatusOr<PrometheusScrape> metrics = cluster_->worker(0).ScrapeMetrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const std::optional<double> memory =
      metrics->Value("kvfleet_worker_spec_proposer_memory_bytes", {{"proposer", "suffix"}});
  ASSERT_TRUE(memory.has_value());
  EXPECT_GT(*memory, 0);
  EXPECT_LE(*memory, 64.0 * 1024 * 1024);  // the worker's default bound
}

TEST_F(ClusterSpeculationTest, AProposerTheWorkerLacksIsRefusedClearly) {
  const TextStreamResult r = cluster_->Chat(CopyingChat("eagle", false));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("\"eagle\" is not loaded"), std::string::npos) << r.status.error_message();
  // And the worker still serves.
  EXPECT_TRUE(cluster_->Chat(CopyingChat("", false)).status.ok());
}

}  // namespace
}  // namespace kvfleet::testing
