// Draft heads on this binary's backend (tests/testing/test_executor.h: the
// CPU in engine_test, the CUDA executor in its emulated and GPU twins): the
// heads' forward over the op set gives the target's own logits when the
// heads are untrained, each row the same alone or with others, and the
// contract's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/spec/heads_proposer.h"
#include "kernels/cpu/quantize.h"
#include "model/draft_heads.h"
#include "model/model_fingerprint.h"
#include "tests/testing/draft_heads.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

class DraftHeadsExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        tools::WriteTinyModel(testing::TestModelShape({.dtype = DType::kQ8_0, .seed = 5}), dir_.Path("t.gguf")).ok());
    model_ = *model::Model::Load(dir_.Path("t.gguf"));
    executor_ = testing::NewTinyExecutor(*model_, 16, 4);
  }
  std::shared_ptr<const model::DraftHeads> Heads(const std::string& name, kvfleet::testing::DraftHeadsSpec spec) {
    kvfleet::testing::WriteDraftHeads(*model_, dir_.Path(name), spec);
    auto heads = model::DraftHeads::Load(dir_.Path(name), *model_, "t.gguf", model::ModelFingerprint(*model_));
    EXPECT_TRUE(heads.ok()) << heads.status();
    return heads.ok() ? std::shared_ptr<const model::DraftHeads>(std::move(*heads)) : nullptr;
  }
  std::vector<float> Hidden(int64_t rows) const {
    const int64_t h = model_->config().hidden_size;
    std::vector<float> x(static_cast<size_t>(rows * h));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
    return x;
  }
  kvfleet::testing::TempDir dir_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<ModelExecutor> executor_;
};

TEST_F(DraftHeadsExecutorTest, UntrainedHeadsGiveTheTargetsOwnLogitsAndGuess) {
  // Zero weights: each head returns the hidden state unchanged, so its
  // logits are the target's output head on it, over the draft vocabulary.
  std::shared_ptr<const model::DraftHeads> heads = Heads("heads", {.num_heads = 2, .scale = 0});
  ASSERT_TRUE(executor_->LoadDraftHeads(heads).ok());
  const std::vector<float> hidden = Hidden(1);
  auto logits = executor_->RunDraftHeads(hidden, 1, 2);
  ASSERT_TRUE(logits.ok()) << logits.status();
  const int64_t h = model_->config().hidden_size, v = heads->vocab_size();
  ASSERT_EQ(static_cast<int64_t>(logits->size()), 2 * v);
  // The target's head on the same state, by hand in double.
  const model::WeightView& out = model_->weights().output;
  std::vector<float> row(static_cast<size_t>(out.cols));
  double best = -INFINITY;
  model::TokenId want = -1;
  for (int64_t i = 0; i < v; ++i) {
    const model::TokenId t = heads->vocab_ids()[static_cast<size_t>(i)];
    kernels::DequantizeRow(out.dtype, static_cast<const uint8_t*>(out.data) + t * RowBytes(out.dtype, out.cols),
                           row.data(), out.cols);
    double logit = 0;
    for (int64_t j = 0; j < h; ++j) logit += static_cast<double>(row[j]) * hidden[j];
    for (int64_t head = 0; head < 2; ++head) EXPECT_NEAR((*logits)[head * v + i], logit, 1e-3) << i;
    if (logit > best) {
      best = logit;
      want = t;
    }
  }
  for (int64_t head = 0; head < 2; ++head) {
    const std::vector<spec::TreeCandidate> top = spec::TopCandidates(
        logits->subspan(static_cast<size_t>(head * v), static_cast<size_t>(v)), heads->vocab_ids(), 3);
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].token, want);
    EXPECT_GE(top[0].probability, top[1].probability);
    EXPECT_GE(top[1].probability, top[2].probability);
    EXPECT_LE(top[0].probability + top[1].probability + top[2].probability, 1.0 + 1e-9);
  }
}

TEST_F(DraftHeadsExecutorTest, EachRowIsTheSameAloneOrWithOthers) {
  std::shared_ptr<const model::DraftHeads> heads = Heads("heads", {.num_heads = 3, .scale = 0.05f});
  ASSERT_TRUE(executor_->LoadDraftHeads(heads).ok());
  const int64_t h = model_->config().hidden_size, v = heads->vocab_size();
  const std::vector<float> hidden = Hidden(3);
  auto batched = executor_->RunDraftHeads(hidden, 3, 3);
  ASSERT_TRUE(batched.ok()) << batched.status();
  const std::vector<float> all(batched->begin(), batched->end());
  for (int64_t r = 0; r < 3; ++r) {
    const std::vector<float> one(hidden.begin() + r * h, hidden.begin() + (r + 1) * h);
    auto alone = executor_->RunDraftHeads(one, 1, 3);
    ASSERT_TRUE(alone.ok()) << alone.status();
    for (int64_t head = 0; head < 3; ++head) {
      const std::vector<float> a(alone->begin() + head * v, alone->begin() + (head + 1) * v);
      const std::vector<float> b(all.begin() + (head * 3 + r) * v, all.begin() + (head * 3 + r + 1) * v);
      EXPECT_EQ(a, b) << "row " << r << " head " << head;
    }
  }
  // Fewer heads than loaded: the first ones, unchanged.
  auto first = executor_->RunDraftHeads(hidden, 3, 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(std::vector<float>(first->begin(), first->end()), std::vector<float>(all.begin(), all.begin() + 3 * v));
}

TEST_F(DraftHeadsExecutorTest, CallsOutsideTheContractAreRefused) {
  const std::vector<float> hidden = Hidden(1);
  EXPECT_EQ(executor_->RunDraftHeads(hidden, 1, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(executor_->LoadDraftHeads(Heads("heads", {.num_heads = 2})).ok());
  EXPECT_EQ(executor_->RunDraftHeads(hidden, 1, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(executor_->RunDraftHeads(hidden, 2, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvfleet::engine
