// DraftHeads: loads heads written for a model, refuses heads for another
// model (naming both fingerprints and the target) or of another hidden
// size; untrained heads (zero weights) guess what the target's own output
// head would, since each then returns the hidden state unchanged.
#include "engine/spec/draft_heads.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/testing/draft_heads.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine::spec {
namespace {

class DraftHeadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools::WriteTinyModel({.dtype = DType::kQ8_0, .seed = 5}, dir_.Path("t.gguf")).ok());
    model_ = *model::Model::Load(dir_.Path("t.gguf"));
  }
  kvfleet::testing::TempDir dir_;
  std::unique_ptr<model::Model> model_;
};

TEST_F(DraftHeadsTest, UntrainedHeadsGuessTheTargetsOwnNextToken) {
  kvfleet::testing::WriteDraftHeads(*model_, dir_.Path("heads"), {.num_heads = 2, .scale = 0});
  absl::StatusOr<DraftHeads> heads =
      DraftHeads::Load(dir_.Path("heads"), *model_, "t.gguf", model::ModelFingerprint(*model_));
  ASSERT_TRUE(heads.ok()) << heads.status();
  EXPECT_EQ(heads->num_heads(), 2);
  const int64_t h = model_->config().hidden_size;
  std::vector<float> hidden(static_cast<size_t>(h));
  for (int64_t i = 0; i < h; ++i) hidden[i] = std::sin(0.37f * static_cast<float>(i));
  // The target's head on the same state, by hand.
  const model::WeightView& out = model_->weights().output;
  std::vector<float> row(static_cast<size_t>(out.cols));
  float best = -INFINITY;
  model::TokenId want = -1;
  for (int64_t t = 0; t < out.rows; ++t) {
    kernels::DequantizeRow(out.dtype, static_cast<const uint8_t*>(out.data) + t * RowBytes(out.dtype, out.cols),
                           row.data(), out.cols);
    float logit = 0;
    for (int64_t i = 0; i < h; ++i) logit += row[i] * hidden[i];
    if (logit > best) {
      best = logit;
      want = static_cast<model::TokenId>(t);
    }
  }
  const std::vector<std::vector<TreeCandidate>> top = heads->Candidates(hidden, 5, 3);
  ASSERT_EQ(top.size(), 2u);  // one per head, however many were asked for
  for (const std::vector<TreeCandidate>& head : top) {
    ASSERT_EQ(head.size(), 3u);
    EXPECT_EQ(head[0].token, want);
    EXPECT_GE(head[0].probability, head[1].probability);
    EXPECT_GE(head[1].probability, head[2].probability);
    EXPECT_LE(head[0].probability + head[1].probability + head[2].probability, 1.0 + 1e-9);
  }
  EXPECT_EQ(heads->Candidates(hidden, 1, 1).size(), 1u);
}

TEST_F(DraftHeadsTest, HeadsForAnotherModelAreRefusedNamingBoth) {
  kvfleet::testing::WriteDraftHeads(*model_, dir_.Path("other"), {.fingerprint = "0123abcd"});
  absl::StatusOr<DraftHeads> heads =
      DraftHeads::Load(dir_.Path("other"), *model_, "target.gguf", model::ModelFingerprint(*model_));
  ASSERT_FALSE(heads.ok());
  EXPECT_EQ(heads.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(heads.status().message().find("0123abcd"), std::string::npos) << heads.status();
  EXPECT_NE(heads.status().message().find("target.gguf"), std::string::npos) << heads.status();
  EXPECT_NE(heads.status().message().find(model::ModelFingerprint(*model_)), std::string::npos) << heads.status();
}

TEST_F(DraftHeadsTest, MissingOrMalformedFilesAreRefusedNamingThem) {
  EXPECT_EQ(DraftHeads::Load(dir_.Path("nothing"), *model_, "t.gguf", model::ModelFingerprint(*model_)).status().code(),
            absl::StatusCode::kInvalidArgument);
  kvfleet::testing::WriteDraftHeads(*model_, dir_.Path("bad"), {});
  std::ofstream(dir_.Path("bad") + "/config.json") << R"({"format": "kvfleet-draft-heads-v1", "hidden_size": 7})";
  const absl::Status s =
      DraftHeads::Load(dir_.Path("bad"), *model_, "t.gguf", model::ModelFingerprint(*model_)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("config.json"), std::string::npos) << s;
}

}  // namespace
}  // namespace kvfleet::engine::spec
