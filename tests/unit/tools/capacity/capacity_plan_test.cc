// The capacity planner's arithmetic: the 70B-class example everyone sizes
// by, budgets from device memory, concurrency, and the window-aware figure.
#include "tools/capacity/capacity_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "model/arch/architecture_registry.h"
#include "model/model.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_architectures.h"

namespace kvfleet::tools {
namespace {

// Llama 3 70B: 80 layers, 64 heads, 8 KV heads of 128, 128,256 tokens.
model::ModelConfig Llama70B() {
  model::ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = 128256;
  c.context_length = 131072;
  c.hidden_size = 8192;
  c.ffn_size = 28672;
  c.num_layers = 80;
  c.num_heads = 64;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.layers.resize(80);
  return c;
}

// Gemma 3 270M: 18 layers, one KV head of 256; five of every six layers see
// the last 512 keys.
model::ModelConfig Gemma270M() {
  model::ModelConfig c;
  c.architecture = "gemma3";
  c.vocab_size = 262144;
  c.context_length = 32768;
  c.hidden_size = 640;
  c.ffn_size = 2048;
  c.num_layers = 18;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 256;
  c.tied_embeddings = true;
  for (int i = 0; i < 18; ++i) c.layers.push_back({.window = i % 6 == 5 ? 0 : 512});
  return c;
}

TEST(CapacityPlanTest, SeventyBClassModelCostsAbout2Point6GBPerEightThousandTokenConversation) {
  const model::ModelConfig c = Llama70B();
  auto plan = PlanCapacity({.config = &c, .kv_budget_bytes = int64_t{80} << 30, .context = 8000, .concurrency = 16});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kv_bytes_per_token, 327680);
  EXPECT_EQ(plan->blocks_per_conversation, 500);
  EXPECT_EQ(plan->kv_bytes_per_conversation, int64_t{327680} * 8000);  // 2.62 GB
  EXPECT_NEAR(static_cast<double>(plan->kv_bytes_per_conversation) / 1e9, 2.6, 0.05);
  EXPECT_NEAR(static_cast<double>(plan->kv_bytes_for_concurrency) / 1e9, 42.0, 0.1);  // sixteen of them
  // 80 GiB hold 32 of them (16,384 blocks of 16 tokens), so sixteen fit.
  EXPECT_EQ(plan->num_blocks, (int64_t{80} << 30) / (327680 * 16));
  EXPECT_EQ(plan->conversations_that_fit, 32);
  EXPECT_TRUE(plan->concurrency_fits);
  EXPECT_EQ(plan->longest_context, plan->num_blocks / 16 * 16);
  EXPECT_FALSE(plan->has_windows);
  EXPECT_EQ(plan->every_block_kv_bytes_per_conversation, plan->kv_bytes_per_conversation);
}

// Tiers below the device keep conversations for reuse: host memory whole
// blocks, disk whole blocks plus a file header each.
TEST(CapacityPlanTest, LowerTiersCountTheConversationsTheyKeep) {
  const model::ModelConfig c = Llama70B();
  auto plan = PlanCapacity({.config = &c,
                            .kv_budget_bytes = int64_t{80} << 30,
                            .devices = 2,
                            .context = 8000,
                            .host_tier_bytes = int64_t{512} << 30,
                            .disk_tier_bytes = int64_t{2} << 40});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t block = 327680 * 16;                                                 // 5 MiB
  EXPECT_EQ(plan->host_tier_conversations, (int64_t{512} << 30) / block / 500 * 2);  // 419
  EXPECT_EQ(plan->disk_tier_conversations, (int64_t{2} << 40) / (block + 128) / 500 * 2);
  EXPECT_GT(plan->host_tier_conversations, 6 * plan->conversations_that_fit);
  auto negative = PlanCapacity({.config = &c, .kv_budget_bytes = int64_t{80} << 30, .host_tier_bytes = -1});
  EXPECT_FALSE(negative.ok());
}

TEST(CapacityPlanTest, AnEightBitCacheCountsItsScalesAndHoldsAboutTwiceTheTokens) {
  const model::ModelConfig c = Llama70B();
  const CapacityInput f16{.config = &c, .kv_budget_bytes = int64_t{80} << 30, .context = 8000};
  CapacityInput int8 = f16, fp8 = f16;
  int8.kv_bytes_per_value = fp8.kv_bytes_per_value = 1;
  int8.kv_row_scale_bytes = 2;  // a binary16 scale per token, KV head and K or V
  auto a = PlanCapacity(f16), b = PlanCapacity(int8), e = PlanCapacity(fp8);
  ASSERT_TRUE(a.ok() && b.ok() && e.ok());
  EXPECT_EQ(b->kv_bytes_per_token, 2 * 80 * 8 * (128 + 2));  // 166,400
  EXPECT_EQ(e->kv_bytes_per_token, 327680 / 2);
  EXPECT_GE(static_cast<double>(b->num_blocks) / a->num_blocks, 1.9);
  EXPECT_EQ(b->every_block_kv_bytes_per_conversation, b->kv_bytes_per_conversation);
}

TEST(CapacityPlanTest, ParameterEstimateOfASeventyBConfigIsSeventyB) {
  const double params = static_cast<double>(EstimateParameters(Llama70B()));
  EXPECT_NEAR(params / 70.55e9, 1.0, 0.005);  // Llama 3 70B: 70.55 billion
}

// Counted from the specs, the estimate is every element of a model of each
// architecture, tied and untied (the tensors that hold config, Llama 3's
// rope_freqs.weight or Phi-3's LongRoPE factors, are not parameters).
TEST(CapacityPlanTest, ParameterEstimateIsEveryTensorOfEachArchitecture) {
  testing::TempDir dir;
  for (const testing::TinyArchitecture& a : testing::TinyArchitectures({.seed = 1})) {
    for (bool tied : {false, true}) {
      TinyModelOptions o = a.options;
      o.tied_embeddings = tied;
      ASSERT_TRUE(WriteTinyModel(o, dir.Path("t.gguf")).ok());
      auto m = model::Model::Load(dir.Path("t.gguf"));
      ASSERT_TRUE(m.ok()) << m.status();
      int64_t elements = 0;
      const model::Architecture& arch = *model::FindArchitectureByName(o.architecture);
      for (const model::TensorView& t : (*m)->source().tensors()) {
        const bool config = std::ranges::any_of(arch.config_tensors, [&](const auto& s) { return t.name == s.gguf; });
        if (!config) elements += t.num_elements;
      }
      EXPECT_EQ(EstimateParameters((*m)->config()), elements) << a.name << (tied ? " tied" : "");
    }
  }
}

TEST(CapacityPlanTest, DeviceMemoryLessWeightsAndOverheadIsTheBudget) {
  const model::ModelConfig c = Llama70B();
  const int64_t weights = int64_t{40} << 30, device = int64_t{80} << 30;
  auto plan = PlanCapacity({.config = &c,
                            .weight_bytes = weights,
                            .device_memory_bytes = device,
                            .devices = 2,
                            .memory_utilization = 0.9,
                            .overhead_bytes = int64_t{2} << 30,
                            .context = 8000});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kv_budget_bytes,
            static_cast<int64_t>(0.9 * static_cast<double>(device)) - weights - (int64_t{2} << 30));
  EXPECT_EQ(plan->num_blocks, plan->kv_budget_bytes / (327680 * 16));
  EXPECT_EQ(plan->conversations_that_fit, plan->num_blocks / 500 * 2);  // a replica per device

  auto too_big = PlanCapacity({.config = &c, .weight_bytes = int64_t{141} << 30, .device_memory_bytes = device});
  ASSERT_TRUE(too_big.ok());
  EXPECT_FALSE(too_big->weights_fit);
  EXPECT_EQ(too_big->num_blocks, 0);
}

TEST(CapacityPlanTest, LongestContextAtAConcurrencyIsCappedByTheModel) {
  const model::ModelConfig c = Gemma270M();
  auto plan = PlanCapacity({.config = &c, .kv_budget_bytes = int64_t{8} << 30, .concurrency = 4});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->longest_context, 32768);  // memory would allow more than the model takes
  EXPECT_TRUE(plan->longest_context_capped);
  auto tight = PlanCapacity({.config = &c, .kv_budget_bytes = int64_t{64} << 20, .concurrency = 4});
  ASSERT_TRUE(tight.ok());
  EXPECT_FALSE(tight->concurrency_fits);
  // The longest whole-block context whose pages fit a quarter of the cache.
  const int64_t quarter = tight->num_blocks / 4;
  EXPECT_LE(tight->page_groups.PagesForSequence(tight->longest_context, 16), quarter);
  EXPECT_GT(tight->page_groups.PagesForSequence(tight->longest_context + 16, 16), quarter);
  EXPECT_EQ(tight->longest_context % 16, 0);
}

TEST(CapacityPlanTest, WindowedLayersHoldOnlyTheBlocksTheirWindowReaches) {
  const model::ModelConfig c = Gemma270M();
  const int64_t per_layer_token = 2 * 1 * 256 * 2;
  // 3 global layers at full context; 15 windowed ones at ⌈512 / 16⌉ + 1 = 33 blocks.
  EXPECT_EQ(WindowAwareKvBytes(c, 4096, 16, 2), (3 * 4096 + 15 * 33 * 16) * per_layer_token);
  EXPECT_EQ(WindowAwareKvBytes(c, 32768, 16, 2), (3 * 32768 + 15 * 33 * 16) * per_layer_token);
  // A context inside the window holds what a full layer does.
  EXPECT_EQ(WindowAwareKvBytes(c, 300, 16, 2), 18 * 19 * 16 * per_layer_token);
  auto plan = PlanCapacity({.config = &c, .kv_budget_bytes = int64_t{1} << 30, .context = 4096});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->has_windows);
  // What the worker allocates: pages of 3 layers, 256 in the global group
  // and 33 in each of the five windowed ones.
  EXPECT_EQ(plan->page_groups.layers_per_page, 3);
  EXPECT_EQ(plan->pages_per_conversation, 256 + 5 * 33);
  EXPECT_EQ(plan->kv_bytes_per_conversation, WindowAwareKvBytes(c, 4096, 16, 2));
  EXPECT_EQ(plan->every_block_kv_bytes_per_conversation, 18 * 4096 * per_layer_token);
  EXPECT_EQ(plan->num_blocks, (int64_t{1} << 30) / (16 * 3 * per_layer_token));
  EXPECT_EQ(plan->conversations_that_fit, plan->num_blocks / (256 + 5 * 33));
  EXPECT_GT(plan->conversations_that_fit, 3 * ((int64_t{1} << 30) / plan->every_block_kv_bytes_per_conversation));
}

// The 70B example on H200s (141 GB): at TP 4 a rank holds a quarter of the
// 16-bit weights and 2 of the 8 KV heads; at TP 8 an eighth and one.
TEST(CapacityPlanTest, TensorParallelRanksHoldTheirShareOfWeightsAndKvHeads) {
  const model::ModelConfig c = Llama70B();
  const int64_t weights = EstimateParameters(c) * 2;  // bf16
  const int64_t h200 = int64_t{141} * 1000 * 1000 * 1000;
  auto one = PlanCapacity({.config = &c, .weight_bytes = weights, .device_memory_bytes = h200, .context = 8000});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_FALSE(one->weights_fit) << "141 GB of weights do not fit one H200";
  EXPECT_EQ(one->shards, "tp1");
  EXPECT_EQ(one->weight_bytes_per_rank, weights);
  for (const int32_t tp : {4, 8}) {
    SCOPED_TRACE(tp);
    auto plan = PlanCapacity({.config = &c,
                              .weight_bytes = weights,
                              .device_memory_bytes = h200,
                              .devices = 8,
                              .tensor_parallel = tp,
                              .context = 8000});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(plan->weights_fit);
    EXPECT_EQ(plan->shards, absl::StrCat("tp", tp));
    EXPECT_EQ(plan->replicas, 8 / tp);
    EXPECT_EQ(plan->kv_heads_per_rank, 8 / tp);
    EXPECT_EQ(plan->kv_bytes_per_token_per_rank, 327680 / tp);
    // Norms and biases are replicated and left out: within a hair of 1/tp.
    EXPECT_NEAR(static_cast<double>(plan->weight_bytes_per_rank) / static_cast<double>(weights), 1.0 / tp, 0.001);
    const int64_t budget =
        static_cast<int64_t>(0.9 * static_cast<double>(h200)) - plan->weight_bytes_per_rank - (int64_t{1} << 30);
    EXPECT_EQ(plan->kv_budget_bytes, budget);
    EXPECT_EQ(plan->num_blocks, budget / (327680 / tp * 16));
    EXPECT_EQ(plan->conversations_that_fit, plan->num_blocks / 500 * (8 / tp));
  }
  // 3 ranks split the 8 KV heads 3, 3 and 2: the largest rank sizes the cache.
  auto three = PlanCapacity({.config = &c, .kv_budget_bytes = 1 << 30, .devices = 3, .tensor_parallel = 3});
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->kv_heads_per_rank, 3);
  EXPECT_EQ(three->shards.rfind("tp3[q24,24,16;", 0), 0u) << three->shards;
  // 9 neither divides the 8 KV heads nor is a multiple of them.
  auto nine = PlanCapacity({.config = &c, .kv_budget_bytes = 1 << 30, .devices = 9, .tensor_parallel = 9});
  ASSERT_FALSE(nine.ok());
  EXPECT_NE(nine.status().message().find("blk.*.attn_k.weight"), std::string::npos) << nine.status();
  EXPECT_NE(nine.status().message().find("Degrees that can: 1, 2, 3, 4, 5, 6, 7, 8, 16, 24"), std::string::npos)
      << nine.status();
  auto uneven = PlanCapacity({.config = &c, .kv_budget_bytes = 1 << 30, .devices = 6, .tensor_parallel = 4});
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("--devices 6"), std::string::npos) << uneven.status();
}

TEST(CapacityPlanTest, BadInputIsRefusedByName) {
  const model::ModelConfig c = Gemma270M();
  EXPECT_NE(PlanCapacity({.config = &c}).status().message().find("--device-memory"), std::string::npos);
  EXPECT_NE(PlanCapacity({.config = &c, .kv_budget_bytes = 1 << 30, .context = 40000}).status().message().find("32768"),
            std::string::npos);
  EXPECT_FALSE(PlanCapacity({.config = &c, .device_memory_bytes = 1 << 30, .memory_utilization = 1.5}).ok());
  EXPECT_FALSE(PlanCapacity({.config = nullptr}).ok());
}

}  // namespace
}  // namespace kvfleet::tools
