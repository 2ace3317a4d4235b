#include "common/flags/flags.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kvfleet::flags {

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args, const std::set<std::string>& valued,
                                   const std::set<std::string>& switches) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[i], "' (flags start with --)"));
    }
    std::string name(arg), value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (switches.count(name) > 0) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      flags.values_[name] = "";
    } else if (valued.count(name) > 0) {
      if (!has_value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        value = args[++i];
      }
      flags.values_[name] = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
  }
  return flags;
}

absl::StatusOr<std::string> Flags::GetString(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return absl::InvalidArgumentError(absl::StrCat("--", name, " is required"));
  return it->second;
}

std::string Flags::GetString(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<int64_t> Flags::GetInt(const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  int64_t v;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be an integer, got '", it->second, "'"));
  }
  return v;
}

absl::StatusOr<double> Flags::GetDouble(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  double v;
  if (!absl::SimpleAtod(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be a number, got '", it->second, "'"));
  }
  return v;
}

absl::StatusOr<std::vector<model::TokenId>> Flags::GetTokenIds(const std::string& name) const {
  std::vector<model::TokenId> ids;
  auto it = values_.find(name);
  if (it == values_.end()) return ids;
  for (absl::string_view part : absl::StrSplit(it->second, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", part, "' is not a token id"));
    }
    ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<std::vector<int64_t>> Flags::GetIntList(const std::string& name, const std::string& fallback) const {
  const std::string text = GetString(name, fallback);
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", part, "' is not an integer"));
    }
    out.push_back(v);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs at least one integer"));
  return out;
}

}  // namespace kvfleet::flags

namespace kvfleet::flags {

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

absl::Status PrintHelp(const char* usage) {
  std::fputs(usage, stdout);
  return absl::OkStatus();
}

}  // namespace kvfleet::flags
