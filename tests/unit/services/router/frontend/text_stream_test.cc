// TextStream: the text a client sees is the detokenized completion, split
// anywhere, cut before the first stop string, with nothing after a stop.
#include "services/router/frontend/text_stream.h"

#include <gtest/gtest.h>

#include "services/router/frontend/router_model.h"
#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::router {
namespace {

class TextStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.Path("t.gguf");
    ASSERT_TRUE(tools::WriteTinyModel({.seed = 4}, path).ok());
    model_ = *RouterModel::Load(path);
  }

  std::vector<model::TokenId> Encode(const std::string& text) {
    return *model_->tokenizer().Encode(text, {.parse_special = true});
  }

  // Pushes every id; the concatenated deltas, then Finish.
  std::string Stream(TextStream& s, const std::vector<model::TokenId>& ids, size_t* pushed = nullptr) {
    std::string out;
    size_t n = 0;
    for (model::TokenId id : ids) {
      out += *s.Push(id);
      ++n;
      if (s.stopped()) break;
    }
    if (pushed) *pushed = n;
    return out + s.Finish();
  }

  testing::TempDir dir_;
  std::unique_ptr<RouterModel> model_;
};

TEST_F(TextStreamTest, WithoutStopsTheTextIsTheDecodedCompletionWithoutControlTokens) {
  absl::StatusOr<TextStream> s = TextStream::Create(model_->tokenizer(), {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Stream(*s, Encode("hello world<|im_end|>")), "hello world");
}

TEST_F(TextStreamTest, TextIsCutBeforeTheFirstStopStringAndNothingFollows) {
  absl::StatusOr<TextStream> s = TextStream::Create(model_->tokenizer(), {"lo w", "xyz"});
  ASSERT_TRUE(s.ok());
  size_t pushed = 0;
  const std::vector<model::TokenId> ids = Encode("hello world and more");
  EXPECT_EQ(Stream(*s, ids, &pushed), "hel");
  EXPECT_TRUE(s->stopped());
  EXPECT_LT(pushed, ids.size());
  EXPECT_EQ(*s->Push(ids.back()), "");
}

TEST_F(TextStreamTest, InvalidStopStringsAndIdsAreRefused) {
  EXPECT_EQ(TextStream::Create(model_->tokenizer(), {""}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<TextStream> s = TextStream::Create(model_->tokenizer(), {});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->Push(model_->vocab_size()).ok());
}

}  // namespace
}  // namespace kvfleet::router
