// A parsed scrape of the Prometheus text exposition format (version 0.0.4,
// what prometheus-cpp's TextSerializer writes), so tests can assert on a
// metrics endpoint by name and labels rather than by string matching.
//
// Owns the samples in the order they appeared and the `# TYPE` of each
// family. Histogram and summary samples keep their suffixed names
// (`x_bucket{le="0.5"}`, `x_sum`, `x_count`); `le` is an ordinary label.
// Values "+Inf", "-Inf" and "NaN" (prometheus-cpp writes "Nan") parse to
// the IEEE values; timestamps are accepted and dropped.
// Thread-safety: immutable after Parse; const methods are safe from any thread.
//
//   ASSIGN_OR_RETURN(PrometheusScrape scrape, PrometheusScrape::Parse(body));
//   std::optional<double> n = scrape.Value("kvfleet_requests_total", {{"status", "ok"}});
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kvfleet::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

class PrometheusScrape {
 public:
  // Fails on the first malformed line, naming its number.
  static absl::StatusOr<PrometheusScrape> Parse(const std::string& text);

  // The value of the sample with exactly this name and exactly these labels
  // (no more, no fewer); nullopt when there is none.
  std::optional<double> Value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
  // The sum over every sample named `name`, whatever its labels; 0 if none.
  double Sum(const std::string& name) const;
  // The type ("counter", "gauge", "histogram", ...) a `# TYPE` line gave
  // `family`; nullopt when none did.
  std::optional<std::string> Type(const std::string& family) const;

  const std::vector<Sample>& samples() const { return samples_; }

 private:
  std::vector<Sample> samples_;
  std::map<std::string, std::string> types_;
};

}  // namespace kvfleet::testing
