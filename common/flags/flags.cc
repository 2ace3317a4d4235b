#include "common/flags/flags.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kvfleet::flags {

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args, const std::set<std::string>& valued,
                                   const std::set<std::string>& switches, size_t max_positional) {
  Flags flags;
  bool only_positional = false;  // after a lone "--"
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (!only_positional && arg == "--" && max_positional > 0) {
      only_positional = true;
      continue;
    }
    if (only_positional || !absl::ConsumePrefix(&arg, "--")) {
      if (flags.positional_.size() >= max_positional) {
        return absl::InvalidArgumentError(
            max_positional == 0
                ? absl::StrCat("unexpected argument '", args[i], "' (flags start with --)")
                : absl::StrCat("unexpected argument '", args[i], "' (at most ", max_positional, " positional argument",
                               max_positional == 1 ? "" : "s", "; quote text with spaces)"));
      }
      flags.positional_.push_back(args[i]);
      continue;
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
      flags.values_[name].push_back("");
    } else if (valued.count(name) > 0) {
      if (!has_value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        value = args[++i];
      }
      flags.values_[name].push_back(value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
  }
  return flags;
}

const std::string* Flags::Last(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second.back();
}

absl::StatusOr<std::string> Flags::GetString(const std::string& name) const {
  const std::string* value = Last(name);
  if (value == nullptr) return absl::InvalidArgumentError(absl::StrCat("--", name, " is required"));
  return *value;
}

std::string Flags::GetString(const std::string& name, const std::string& fallback) const {
  const std::string* value = Last(name);
  return value == nullptr ? fallback : *value;
}

std::vector<std::string> Flags::GetStrings(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>() : it->second;
}

absl::StatusOr<int64_t> Flags::GetInt(const std::string& name, int64_t fallback) const {
  const std::string* value = Last(name);
  if (value == nullptr) return fallback;
  int64_t v;
  if (!absl::SimpleAtoi(*value, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be an integer, got '", *value, "'"));
  }
  return v;
}

absl::StatusOr<int64_t> Flags::GetIntOrAlias(const std::string& name, const std::string& alias,
                                             int64_t fallback) const {
  if (!Has(alias)) return GetInt(name, fallback);
  const absl::StatusOr<int64_t> aliased = GetInt(alias, fallback);
  if (!aliased.ok() || !Has(name)) return aliased;
  const absl::StatusOr<int64_t> named = GetInt(name, fallback);
  if (named.ok() && *named != *aliased) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " ", *named, " and --", alias, " ", *aliased, " name the same setting; give one"));
  }
  return named;
}

absl::StatusOr<double> Flags::GetDouble(const std::string& name, double fallback) const {
  const std::string* value = Last(name);
  if (value == nullptr) return fallback;
  double v;
  if (!absl::SimpleAtod(*value, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be a number, got '", *value, "'"));
  }
  return v;
}

absl::StatusOr<std::vector<int32_t>> Flags::GetTokenIds(const std::string& name) const {
  std::vector<int32_t> ids;
  const std::string* value = Last(name);
  if (value == nullptr) return ids;
  for (absl::string_view part : absl::StrSplit(*value, ',', absl::SkipWhitespace())) {
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

absl::StatusOr<std::vector<double>> Flags::GetDoubleList(const std::string& name, const std::string& fallback) const {
  const std::string text = GetString(name, fallback);
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    double v;
    if (!absl::SimpleAtod(part, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", part, "' is not a number"));
    }
    out.push_back(v);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs at least one number"));
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
