#include "engine/lora/lora_residency.h"

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tools/tiny_model/tiny_lora.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

using Verdict = RunGate::Verdict;

class LoraResidencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 3}, dir_.Path("m.gguf")).ok());
    model_ = *model::Model::Load(dir_.Path("m.gguf"));
    executor_ = testing::NewExecutor(*model_, {.num_blocks = 16, .lora = {.max_loras = 2, .max_rank = 4}});
    for (uint32_t i = 0; i < 3; ++i) {
      adapters_.push_back(std::make_shared<const model::LoraAdapter>(
          tools::RandomLoraAdapter(*model_, {.name = std::string(1, static_cast<char>('a' + i)), .seed = i})));
    }
  }

  // A waiting request under adapter i.
  std::unique_ptr<Request> Under(int i) {
    auto r = std::make_unique<Request>(EngineRequest{.id = RequestId(++ids_), .prompt = {1}}, 0, 0, nullptr);
    r->params.lora = adapters_[static_cast<size_t>(i)];
    r->lora_identity = r->params.lora->identity();
    return r;
  }
  std::string Identity(int i) const { return adapters_[static_cast<size_t>(i)]->identity(); }

  testing::TempDir dir_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<ModelExecutor> executor_;
  std::vector<std::shared_ptr<const model::LoraAdapter>> adapters_;
  uint64_t ids_ = 0;
};

TEST_F(LoraResidencyTest, LoadsIntoFreeSlotsThenEvictsTheLeastRecentlyUsedUnpinnedOne) {
  LoraResidency lora(*executor_, 2);
  auto a = Under(0), a2 = Under(0), b = Under(1), c = Under(2);
  EXPECT_EQ(lora.Acquire(*a), Verdict::kAdmit);
  EXPECT_EQ(lora.Acquire(*a2), Verdict::kAdmit);
  EXPECT_EQ(a2->lora_slot, a->lora_slot) << "one copy for every request under a";
  EXPECT_EQ(lora.Acquire(*b), Verdict::kAdmit);
  EXPECT_EQ(lora.stats().loads, 2);
  EXPECT_EQ(lora.Acquire(*c), Verdict::kWait) << "both slots pinned";
  EXPECT_EQ(c->lora_slot, -1);
  lora.Release(*a);
  EXPECT_EQ(lora.Acquire(*c), Verdict::kWait) << "a2 still pins a";
  lora.Release(*a2);
  lora.Release(*a2);  // idempotent
  EXPECT_EQ(lora.Acquire(*c), Verdict::kAdmit);
  EXPECT_EQ(lora.stats().evictions, 1);
  EXPECT_EQ(lora.resident(), (std::vector<std::string>{Identity(2), Identity(1)}));
  // a again: b was used before c, so b goes once unpinned.
  lora.Release(*b);
  auto a3 = Under(0);
  EXPECT_EQ(lora.Acquire(*a3), Verdict::kAdmit);
  EXPECT_EQ(lora.resident(), (std::vector<std::string>{Identity(2), Identity(0)}));
  EXPECT_EQ(lora.stats().loads, 4);
  EXPECT_GT(lora.stats().load_seconds, 0.0);
  // The base model needs no slot.
  auto base = std::make_unique<Request>(EngineRequest{.id = RequestId(99), .prompt = {1}}, 0, 0, nullptr);
  EXPECT_EQ(lora.Acquire(*base), Verdict::kAdmit);
  EXPECT_EQ(base->lora_slot, -1);
}

TEST_F(LoraResidencyTest, EvictionWaitsForTheLastRequestUsingTheAdapter) {
  LoraResidency lora(*executor_, 2);
  auto a = Under(0), b = Under(1);
  ASSERT_EQ(lora.Acquire(*a), Verdict::kAdmit);
  ASSERT_EQ(lora.Acquire(*b), Verdict::kAdmit);
  lora.Release(*b);
  lora.Evict("b");
  lora.Evict("a");
  EXPECT_EQ(lora.resident(), (std::vector<std::string>{Identity(0)})) << "b went at once, a is in use";
  lora.Release(*a);
  EXPECT_TRUE(lora.resident().empty());
}

TEST_F(LoraResidencyTest, AnAdapterTheExecutorRefusesFailsItsRequest) {
  LoraResidency lora(*executor_, 2);
  auto big = std::make_unique<Request>(EngineRequest{.id = RequestId(1), .prompt = {1}}, 0, 0, nullptr);
  big->params.lora = std::make_shared<const model::LoraAdapter>(
      tools::RandomLoraAdapter(*model_, {.name = "big", .rank = 8}));  // over the executor's max rank 4
  big->lora_identity = big->params.lora->identity();
  EXPECT_EQ(lora.Acquire(*big), Verdict::kFail);
  EXPECT_TRUE(lora.resident().empty());
}

}  // namespace
}  // namespace kvfleet::engine
