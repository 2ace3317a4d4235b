// Command-line flags of one subcommand of a kvfleet tool (the CLI, the
// services, the benchmarks): `--name value`,
// `--name=value` and bare `--switch`. Unknown flags and malformed values are
// errors that name the flag, so a typo never silently falls back to a default.
// A flag given twice keeps every value (GetStrings); the getters of one value
// take the last. A command may accept a few positional arguments (words that
// are not flags, or anything after a lone `--`).
//
//   ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, {"model", "threads"}, {"ignore-eos"}));
//   ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0));
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kvfleet::flags {

class Flags {
 public:
  // `valued` flags take a value; `switches` do not.
  // At most `max_positional` positional arguments are accepted; one more is
  // an error.
  static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args, const std::set<std::string>& valued,
                                     const std::set<std::string>& switches, size_t max_positional = 0);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  absl::StatusOr<std::string> GetString(const std::string& name) const;  // required
  std::string GetString(const std::string& name, const std::string& fallback) const;
  // Every value of a repeatable flag, in the order given; empty when absent.
  std::vector<std::string> GetStrings(const std::string& name) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  // --name, or --alias (another tool's spelling of it, as vLLM's
  // --tensor-parallel-size); both, with different values, is an error.
  absl::StatusOr<int64_t> GetIntOrAlias(const std::string& name, const std::string& alias, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  bool GetSwitch(const std::string& name) const { return Has(name); }
  // A comma-separated list of token ids ("1,2,3"), as int32 (model::TokenId is int32_t;
  // flags sit below the model layer and do not name it).
  absl::StatusOr<std::vector<int32_t>> GetTokenIds(const std::string& name) const;
  // A comma-separated list of integers; `fallback` (same syntax) when absent.
  absl::StatusOr<std::vector<int64_t>> GetIntList(const std::string& name, const std::string& fallback) const;
  // The same for numbers ("0.3,0.7").
  absl::StatusOr<std::vector<double>> GetDoubleList(const std::string& name, const std::string& fallback) const;

  const std::vector<std::string>& positional() const { return positional_; }

 private:
  // The last value given for `name`, or nullptr.
  const std::string* Last(const std::string& name) const;

  std::map<std::string, std::vector<std::string>> values_;  // every value, in order; "" for switches
  std::vector<std::string> positional_;
};

}  // namespace kvfleet::flags

namespace kvfleet::flags {

// True when the arguments ask for --help (or -h).
bool WantsHelp(const std::vector<std::string>& args);

// Prints a command's usage to stdout; returns OK so commands can
// `return PrintHelp(kUsage);`.
absl::Status PrintHelp(const char* usage);

}  // namespace kvfleet::flags
