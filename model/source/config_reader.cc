#include "model/source/config_reader.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvfleet::model {

absl::StatusOr<int64_t> ConfigReader::PositiveInt(std::string_view key, int64_t max) const {
  if (!Has(key)) return Missing(key);
  ASSIGN_OR_RETURN(int64_t v, Int(key));
  if (v <= 0 || v > max) {
    return absl::InvalidArgumentError(absl::StrCat(origin(), ": '", std::string(key), "' = ", v, " is out of range [1, ", max, "]"));
  }
  return v;
}

absl::StatusOr<int64_t> ConfigReader::IntOr(std::string_view key, int64_t fallback) const {
  if (!Has(key)) return fallback;
  return Int(key);
}

absl::StatusOr<double> ConfigReader::FloatOr(std::string_view key, double fallback) const {
  if (!Has(key)) return fallback;
  return Float(key);
}

absl::StatusOr<std::string> ConfigReader::StringOr(std::string_view key, std::string fallback) const {
  if (!Has(key)) return fallback;
  return String(key);
}

absl::StatusOr<bool> ConfigReader::BoolOr(std::string_view key, bool fallback) const {
  if (!Has(key)) return fallback;
  return Bool(key);
}

absl::Status ConfigReader::Invalid(std::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(origin(), ": ", std::string(what)));
}

absl::Status ConfigReader::Missing(std::string_view key) const {
  return absl::InvalidArgumentError(
      absl::StrCat(origin(), ": '", std::string(key), "' is missing; the architecture needs it (is this file complete?)"));
}

}  // namespace kvfleet::model
