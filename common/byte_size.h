// Memory sizes as people write them on command lines: "2GiB", "512MiB",
// "1.5G", "65536". Binary and decimal suffixes mean what they say (GiB =
// 2^30, GB = 10^9); a bare K/M/G/T is binary, as in most serving tools.
//
//   ASSIGN_OR_RETURN(int64_t bytes, ParseByteSize("2GiB"));   // 2147483648
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace kvfleet {

absl::StatusOr<int64_t> ParseByteSize(const std::string& text);

}  // namespace kvfleet
