// A GPU cluster end to end (label gpu): a real cachemanager, a real router
// and a kvfleet-worker on --device cuda serving a SmolLM2-shaped
// random-weight model (SmolLM2-135M's layers, heads and 49,152-token
// vocabulary), through the public API. Skipped, with the reason, where no
// GPU is usable.
#include <gtest/gtest.h>

#include <thread>

#include "engine/executor/executor_factory.h"
#include "tests/integration/services/router/router_cluster.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::testing {
namespace {

// SmolLM2-135M's shape, random weights, Q4_1 as the default model.
constexpr tools::TinyModelOptions kSmolLm2Shape{.dtype = DType::kQ4_1,
                                                .seed = 5,
                                                .num_layers = 30,
                                                .hidden_size = 576,
                                                .num_heads = 9,
                                                .num_kv_heads = 3,
                                                .ffn_size = 1536,
                                                .context_length = 8192,
                                                .rope_theta = 100000.0f,
                                                .tied_embeddings = true,
                                                .vocab_size = 49152};

class ClusterGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (engine::CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU to run the CUDA backend on: " << why;
    model_ = dir_.Path("smollm2-shape.gguf");
    ASSERT_TRUE(tools::WriteTinyModel(kSmolLm2Shape, model_).ok());
  }

  TempDir dir_;
  std::string model_;
};

TEST_F(ClusterGpuTest, ACudaWorkerServesThroughTheRouterDeterministicallyAndSaysWhatItRuns) {
  RouterCluster gpu;
  ASSERT_TRUE(
      gpu.Start({.workers = 1, .model_path = model_, .worker_args = {"--device", "cuda", "--kv-cache-memory", "2GiB"}})
          .ok());
  const v1::GenerateTextRequest request = TinyTextRequest(7, 300, 48);
  const TextStreamResult first = gpu.Generate(request);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(first.finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(first.tokens.size(), 48u);
  // Batched with others and served from the prefix cache: the same tokens.
  std::vector<TextStreamResult> batch(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { batch[i] = gpu.Generate(i == 0 ? request : TinyTextRequest(20 + i, 200, 48)); });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status.error_message();
  EXPECT_EQ(batch[0].tokens, first.tokens);
  EXPECT_GT(batch[0].usage.cached_prompt_tokens(), 0);

  auto scrape = gpu.worker(0).ScrapeMetrics();
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  bool on_gpu = false;
  for (const Sample& sample : scrape->samples()) {
    if (sample.name != "kvfleet_worker_device_info") continue;
    on_gpu =
        on_gpu || (sample.labels.at("device") == "cuda:0" && sample.labels.at("numerics").rfind("cuda-sm", 0) == 0);
  }
  EXPECT_TRUE(on_gpu) << "the worker reports device cuda:0 and a cuda-sm numerics identity";

  // The CPU backend on the same model: close, not identical numerics, so
  // greedy tokens agree for a while; recorded, not required.
  RouterCluster cpu;
  ASSERT_TRUE(cpu.Start({.workers = 1, .model_path = model_, .worker_args = {"--device", "cpu"}}).ok());
  const TextStreamResult reference = cpu.Generate(request);
  ASSERT_TRUE(reference.status.ok()) << reference.status.error_message();
  size_t agree = 0;
  while (agree < reference.tokens.size() && reference.tokens[agree] == first.tokens[agree]) ++agree;
  RecordProperty("greedy_tokens_agreeing_with_cpu", static_cast<int>(agree));
  std::printf("greedy tokens agreeing with the CPU backend before the first difference: %zu of 48\n", agree);
}

}  // namespace
}  // namespace kvfleet::testing
