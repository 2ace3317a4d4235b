// 8-bit activations end to end on the real default model: a real router,
// cachemanager and a kvfleet-worker started with --cpu-activations q8, which
// packs its weights into panels at start. The worker says which arithmetic
// it runs. A request's greedy tokens are the same alone, batched with others
// and from the prefix cache. On a prompt where both modes match the float64
// reference (bench/activation_accuracy.py), they match float32's too.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/integration/services/router/router_cluster.h"
#include "tests/testing/default_model.h"

namespace kvfleet::testing {
namespace {

v1::ChatRequest GreedyChat(const std::string& question) {
  v1::ChatRequest r;
  v1::ChatMessage* m = r.add_messages();
  m->set_role("user");
  m->set_content(question);
  r.mutable_options()->mutable_stopping()->set_max_tokens(24);
  return r;
}

// The numerics label of the worker's device_info metric, or "" if absent.
std::string WorkerNumerics(RouterCluster& cluster) {
  absl::StatusOr<PrometheusScrape> scrape = cluster.worker(0).ScrapeMetrics();
  if (!scrape.ok()) return "";
  for (const Sample& sample : scrape->samples()) {
    if (sample.name == "kvfleet_worker_device_info") return sample.labels.at("numerics");
  }
  return "";
}

TEST(ClusterCpuActivationsTest, AnEightBitWorkerServesExactlyAndSaysWhatItRuns) {
  if (!DefaultModelFetched()) GTEST_SKIP() << kDefaultModelMissing;
  const v1::ChatRequest rainbow = GreedyChat("Name three colors of the rainbow.");

  RouterCluster q8;
  ASSERT_TRUE(q8.Start({.workers = 1,
                        .model_path = kDefaultModelPath,
                        .worker_args = {"--cpu-activations", "q8", "--kv-cache-dtype", "f16", "--kv-cache-memory",
                                        "128MiB", "--threads", "2"}})
                  .ok());
  EXPECT_EQ(WorkerNumerics(q8), "cpu-q8/3");
  const TextStreamResult alone = q8.Chat(rainbow);
  ASSERT_TRUE(alone.status.ok()) << alone.status.error_message();
  ASSERT_GT(alone.tokens.size(), 5u) << alone.text;

  // Batched with three other conversations, and its prompt now cached.
  const std::vector<std::string> others = {"Write a haiku about autumn leaves.", "What is 12 plus 30?",
                                           "List the first five prime numbers."};
  std::vector<TextStreamResult> batch(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { batch[i] = q8.Chat(i == 0 ? rainbow : GreedyChat(others[i - 1])); });
  }
  for (std::thread& t : threads) t.join();
  for (const TextStreamResult& r : batch) ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(batch[0].tokens, alone.tokens) << "batched and cached: the tokens of the request alone";
  EXPECT_EQ(batch[0].text, alone.text);
  EXPECT_GT(batch[0].usage.cached_prompt_tokens(), 0);

  // The exact mode pinned: the model's calibration record may make 8-bit
  // activations its default.
  RouterCluster f32;
  ASSERT_TRUE(f32.Start({.workers = 1,
                         .model_path = kDefaultModelPath,
                         .worker_args = {"--cpu-activations", "f32", "--kv-cache-dtype", "f16", "--kv-cache-memory",
                                         "128MiB", "--threads", "2"}})
                  .ok());
  EXPECT_EQ(WorkerNumerics(f32), "cpu/1");
  const TextStreamResult reference = f32.Chat(rainbow);
  ASSERT_TRUE(reference.status.ok()) << reference.status.error_message();
  // Another arithmetic, so only close in general; on this prompt both give
  // the float64 reference's continuation.
  EXPECT_EQ(reference.tokens, alone.tokens) << "float32: " << reference.text << "\n8-bit: " << alone.text;
}

}  // namespace
}  // namespace kvfleet::testing
