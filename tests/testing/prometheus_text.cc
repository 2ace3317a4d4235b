#include "tests/testing/prometheus_text.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace kvfleet::testing {

namespace {

bool IsNameChar(char c, bool first) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && absl::ascii_isdigit(static_cast<unsigned char>(c)));
}

// Reads a metric or label name at the front of `s`.
absl::StatusOr<std::string> ConsumeName(absl::string_view& s) {
  size_t n = 0;
  while (n < s.size() && IsNameChar(s[n], n == 0)) ++n;
  if (n == 0) return absl::InvalidArgumentError("expected a name");
  std::string name(s.substr(0, n));
  s.remove_prefix(n);
  return name;
}

// Reads a double-quoted label value with \\, \" and \n escapes.
absl::StatusOr<std::string> ConsumeQuoted(absl::string_view& s) {
  if (!absl::ConsumePrefix(&s, "\"")) return absl::InvalidArgumentError("expected '\"' before a label value");
  std::string out;
  while (!s.empty()) {
    const char c = s[0];
    s.remove_prefix(1);
    if (c == '"') return out;
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (s.empty()) break;
    const char e = s[0];
    s.remove_prefix(1);
    out.push_back(e == 'n' ? '\n' : e);  // \\ and \" stand for themselves
  }
  return absl::InvalidArgumentError("unterminated label value");
}

// Reads `{name="value",...}` (a trailing comma is allowed).
absl::StatusOr<std::map<std::string, std::string>> ConsumeLabels(absl::string_view& s) {
  std::map<std::string, std::string> labels;
  if (!absl::ConsumePrefix(&s, "{")) return labels;
  while (true) {
    s = absl::StripLeadingAsciiWhitespace(s);
    if (absl::ConsumePrefix(&s, "}")) return labels;
    ASSIGN_OR_RETURN(std::string name, ConsumeName(s));
    s = absl::StripLeadingAsciiWhitespace(s);
    if (!absl::ConsumePrefix(&s, "=")) return absl::InvalidArgumentError("expected '=' after a label name");
    s = absl::StripLeadingAsciiWhitespace(s);
    ASSIGN_OR_RETURN(std::string value, ConsumeQuoted(s));
    if (!labels.emplace(name, value).second) return absl::InvalidArgumentError("label '" + name + "' repeated");
    s = absl::StripLeadingAsciiWhitespace(s);
    if (absl::ConsumePrefix(&s, ",")) continue;
    if (absl::ConsumePrefix(&s, "}")) return labels;
    return absl::InvalidArgumentError("expected ',' or '}' after a label value");
  }
}

absl::StatusOr<double> ParseValue(absl::string_view text) {
  if (text == "+Inf" || text == "Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  // The format says "NaN"; prometheus-cpp writes "Nan".
  if (text == "NaN" || text == "Nan") return std::numeric_limits<double>::quiet_NaN();
  double v = 0;
  if (!absl::SimpleAtod(text, &v)) return absl::InvalidArgumentError(absl::StrCat("bad value '", text, "'"));
  return v;
}

absl::StatusOr<Sample> ParseSampleLine(absl::string_view s) {
  Sample sample;
  ASSIGN_OR_RETURN(sample.name, ConsumeName(s));
  ASSIGN_OR_RETURN(sample.labels, ConsumeLabels(s));
  // What remains: the value and an optional timestamp, space separated.
  const std::vector<absl::string_view> fields = absl::StrSplit(s, ' ', absl::SkipWhitespace());
  if (fields.empty() || fields.size() > 2)
    return absl::InvalidArgumentError("expected a value and an optional timestamp");
  ASSIGN_OR_RETURN(sample.value, ParseValue(fields[0]));
  return sample;
}

}  // namespace

absl::StatusOr<PrometheusScrape> PrometheusScrape::Parse(const std::string& text) {
  PrometheusScrape scrape;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (absl::ConsumePrefix(&line, "#")) {
      const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
      if (words.size() >= 3 && words[0] == "TYPE") scrape.types_[std::string(words[1])] = std::string(words[2]);
      continue;  // HELP lines and plain comments carry nothing to assert on
    }
    absl::StatusOr<Sample> sample = ParseSampleLine(line);
    if (!sample.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics line ", line_number, ": ", sample.status().message(), ": ", line));
    }
    scrape.samples_.push_back(*std::move(sample));
  }
  return scrape;
}

std::optional<double> PrometheusScrape::Value(const std::string& name,
                                              const std::map<std::string, std::string>& labels) const {
  for (const Sample& s : samples_) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::nullopt;
}

double PrometheusScrape::Sum(const std::string& name) const {
  double sum = 0;
  for (const Sample& s : samples_) {
    if (s.name == name) sum += s.value;
  }
  return sum;
}

std::optional<std::string> PrometheusScrape::Type(const std::string& family) const {
  auto it = types_.find(family);
  if (it == types_.end()) return std::nullopt;
  return it->second;
}

}  // namespace kvfleet::testing
