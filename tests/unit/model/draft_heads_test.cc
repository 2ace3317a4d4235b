// DraftHeads: loads heads written for a model, refuses heads for another
// model (naming both fingerprints and the target) or of another hidden
// size. What they compute is tested on each executor
// (tests/unit/engine/executor/draft_heads_executor_test.cc).
#include "model/draft_heads.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "model/model_fingerprint.h"
#include "tests/testing/draft_heads.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

class DraftHeadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools::WriteTinyModel({.dtype = DType::kQ8_0, .seed = 5}, dir_.Path("t.gguf")).ok());
    model_ = *Model::Load(dir_.Path("t.gguf"));
  }
  kvfleet::testing::TempDir dir_;
  std::unique_ptr<Model> model_;
};

TEST_F(DraftHeadsTest, TheWeightsAreTheFilesAndTheTargetsDraftRows) {
  kvfleet::testing::WriteDraftHeads(*model_, dir_.Path("heads"), {.num_heads = 2});
  auto heads = DraftHeads::Load(dir_.Path("heads"), *model_, "t.gguf", ModelFingerprint(*model_));
  ASSERT_TRUE(heads.ok()) << heads.status();
  const DraftHeadWeights& w = (*heads)->weights();
  EXPECT_EQ((*heads)->num_heads(), 2);
  EXPECT_EQ(w.hidden_size(), model_->config().hidden_size);
  ASSERT_EQ(w.heads.size(), 2u);
  EXPECT_EQ(w.heads[0].weight.rows, w.hidden_size());
  EXPECT_EQ(w.heads[0].bias.dtype, DType::kF32);
  // The draft rows of the output head are the target's, byte for byte.
  const WeightView& out = model_->weights().output;
  ASSERT_EQ(w.vocab_head.dtype, out.dtype);
  ASSERT_EQ(w.vocab_head.rows, static_cast<int64_t>((*heads)->vocab_ids().size()));
  const int64_t row = RowBytes(out.dtype, out.cols);
  for (size_t v = 0; v < (*heads)->vocab_ids().size(); ++v) {
    const TokenId t = (*heads)->vocab_ids()[v];
    EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(w.vocab_head.data) + v * row,
                          static_cast<const uint8_t*>(out.data) + t * row, static_cast<size_t>(row)),
              0)
        << v;
  }
}

TEST_F(DraftHeadsTest, HeadsForAnotherModelAreRefusedNamingBoth) {
  kvfleet::testing::WriteDraftHeads(*model_, dir_.Path("other"), {.fingerprint = "0123abcd"});
  auto heads = DraftHeads::Load(dir_.Path("other"), *model_, "target.gguf", ModelFingerprint(*model_));
  ASSERT_FALSE(heads.ok());
  EXPECT_EQ(heads.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(heads.status().message().find("0123abcd"), std::string::npos) << heads.status();
  EXPECT_NE(heads.status().message().find("target.gguf"), std::string::npos) << heads.status();
  EXPECT_NE(heads.status().message().find(ModelFingerprint(*model_)), std::string::npos) << heads.status();
}

TEST_F(DraftHeadsTest, MissingOrMalformedFilesAreRefusedNamingThem) {
  EXPECT_EQ(DraftHeads::Load(dir_.Path("nothing"), *model_, "t.gguf", ModelFingerprint(*model_)).status().code(),
            absl::StatusCode::kInvalidArgument);
  kvfleet::testing::WriteDraftHeads(*model_, dir_.Path("bad"), {});
  std::ofstream(dir_.Path("bad") + "/config.json") << R"({"format": "kvfleet-draft-heads-v1", "hidden_size": 7})";
  const absl::Status s = DraftHeads::Load(dir_.Path("bad"), *model_, "t.gguf", ModelFingerprint(*model_)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("config.json"), std::string::npos) << s;
}

}  // namespace
}  // namespace kvfleet::model
