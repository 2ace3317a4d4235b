#include "common/byte_size.h"

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvfleet {

absl::StatusOr<int64_t> ParseByteSize(const std::string& text) {
  static const std::map<std::string, double> kUnits = {
      {"", 1.0},          {"b", 1.0},         {"k", 1024.0},          {"kib", 1024.0},       {"kb", 1e3},
      {"m", 1048576.0},   {"mib", 1048576.0}, {"mb", 1e6},            {"g", 1073741824.0},   {"gib", 1073741824.0},
      {"gb", 1e9},        {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12}};
  const std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  size_t split = 0;
  while (split < s.size() && (absl::ascii_isdigit(s[split]) || s[split] == '.')) ++split;
  double number = 0.0;
  const auto unit = kUnits.find(std::string(absl::StripAsciiWhitespace(s.substr(split))));
  if (split == 0 || !absl::SimpleAtod(s.substr(0, split), &number) || unit == kUnits.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a memory size; write e.g. 2GiB, 512MiB, 1.5G or a byte count"));
  }
  const double bytes = number * unit->second;
  if (!(bytes >= 1.0) || bytes > 9e18) {
    return absl::InvalidArgumentError(absl::StrCat("memory size '", text, "' is out of range"));
  }
  return static_cast<int64_t>(std::llround(bytes));
}

}  // namespace kvfleet
