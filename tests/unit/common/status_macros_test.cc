#include "common/status_macros.h"

#include <gtest/gtest.h>

namespace kvfleet {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, PropagateErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(2).ok());
  EXPECT_FALSE(CheckEven(3).ok());
}

}  // namespace
}  // namespace kvfleet
