// What a worker and a request may ask of speculation: the refusals name
// the value, the bound and the loaded proposers.
#include "engine/request/speculation_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvfleet::engine::spec {
namespace {

const std::vector<std::string> kLoaded = {"ngram", "heads"};

TEST(SpeculationOptionsTest, TheWorkersDefaultMustBeLoadedOrAutoOrOff) {
  EXPECT_TRUE(SpeculationOptions{}.Validate({}).ok());  // off, with nothing loaded
  EXPECT_TRUE((SpeculationOptions{.proposer = "heads"}.Validate(kLoaded).ok()));
  EXPECT_TRUE((SpeculationOptions{.proposer = "auto"}.Validate({}).ok()));
  const absl::Status missing = SpeculationOptions{.proposer = "draft"}.Validate(kLoaded);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("\"draft\" is not loaded on this worker (loaded: ngram, heads)"), std::string::npos)
      << missing;
  const absl::Status none = SpeculationOptions{.proposer = "ngram"}.Validate({});
  EXPECT_NE(none.message().find("(loaded: none)"), std::string::npos) << none;
  for (int32_t k : {0, kMaxDraftTokensLimit + 1}) {
    const absl::Status s = SpeculationOptions{.max_draft_tokens = k}.Validate({});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k;
    EXPECT_NE(s.message().find("got " + std::to_string(k)), std::string::npos) << s;
  }
}

TEST(SpeculationOptionsTest, ARequestMayLeaveEitherToTheWorker) {
  EXPECT_TRUE(SpeculationParams{}.Validate({}).ok());  // the worker's proposer and k
  EXPECT_TRUE((SpeculationParams{.proposer = "off"}.Validate({}).ok()));
  EXPECT_TRUE((SpeculationParams{.max_draft_tokens = kMaxDraftTokensLimit}.Validate({}).ok()));
  const absl::Status unknown = SpeculationParams{.proposer = "medusa"}.Validate(kLoaded);
  EXPECT_NE(unknown.message().find("speculation.proposer \"medusa\""), std::string::npos) << unknown;
  const absl::Status negative = SpeculationParams{.max_draft_tokens = -1}.Validate({});
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("(0: the worker's)"), std::string::npos) << negative;
}

}  // namespace
}  // namespace kvfleet::engine::spec
