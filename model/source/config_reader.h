// Typed access to a model's hyperparameters as its file stores them: GGUF
// metadata ("qwen2.block_count") or a Hugging Face config.json
// ("num_hidden_layers", "rope_scaling.factor": a dotted key walks nested
// objects). Architectures parse their own keys through it
// (model/arch/README.md); every error names the file and the key.
//
// Thread-safety: immutable; safe to share for reading.
//
//   ASSIGN_OR_RETURN(int64_t layers, reader.PositiveInt("num_hidden_layers"));
//   double theta = reader.FloatOr("rope_theta", 10000.0);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kvfleet::model {

class ConfigReader {
 public:
  virtual ~ConfigReader() = default;

  // The file the values come from, for messages.
  virtual const std::string& origin() const = 0;
  // False for an absent key and for an explicit null (config.json's
  // "sliding_window": null means "none").
  virtual bool Has(std::string_view key) const = 0;
  // NotFound when absent; InvalidArgument naming the key when of another type.
  virtual absl::StatusOr<int64_t> Int(std::string_view key) const = 0;
  virtual absl::StatusOr<double> Float(std::string_view key) const = 0;  // integers too
  virtual absl::StatusOr<std::string> String(std::string_view key) const = 0;
  virtual absl::StatusOr<bool> Bool(std::string_view key) const = 0;
  virtual absl::StatusOr<std::vector<std::string>> StringList(std::string_view key) const = 0;
  virtual absl::StatusOr<std::vector<int64_t>> IntList(std::string_view key) const = 0;
  virtual absl::StatusOr<std::vector<float>> FloatList(std::string_view key) const = 0;  // integers too

  // An integer in [1, max]: InvalidArgument naming the file, key and value otherwise.
  absl::StatusOr<int64_t> PositiveInt(std::string_view key, int64_t max = int64_t{1} << 31) const;
  // The value, or `fallback` when the key is absent (still an error when present and malformed).
  absl::StatusOr<int64_t> IntOr(std::string_view key, int64_t fallback) const;
  absl::StatusOr<double> FloatOr(std::string_view key, double fallback) const;
  absl::StatusOr<std::string> StringOr(std::string_view key, std::string fallback) const;
  absl::StatusOr<bool> BoolOr(std::string_view key, bool fallback) const;

  // InvalidArgument "<file>: <what>" (for values that parse but make no sense).
  absl::Status Invalid(std::string_view what) const;
  // InvalidArgument "<file>: '<key>' is missing" with a hint of what to do.
  absl::Status Missing(std::string_view key) const;
};

}  // namespace kvfleet::model
