// The reference distributions of a teacher-forced evaluation
// (`kvfleet eval --save-reference`), read back by a later one (--reference)
// to measure KL divergence without running the reference again.
//
// Layout (little-endian): "KVFEVAL1", uint32 version 1, int64 vocabulary,
// int64 positions, then per scored position its next token (int32) and its
// log-probabilities as float16. Each log-probability is off by at most
// half a float16 step: a relative error in the probability under 0.05% for
// log-probabilities in [−1, 0] and under 0.8% in [−16, −8]. 2 bytes a
// vocabulary entry per position: SmolLM2's 49,152 entries take 96 KiB.
//
//   ASSIGN_OR_RETURN(auto w, ReferenceWriter::Create(path, vocab));
//   RETURN_IF_ERROR(w.Add(next, log_probs));  ...  RETURN_IF_ERROR(w.Finish());
#pragma once

#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/token_id.h"

namespace kvfleet::tools {

class ReferenceWriter {
 public:
  static absl::StatusOr<ReferenceWriter> Create(const std::string& path, int64_t vocab);
  absl::Status Add(model::TokenId next, std::span<const double> log_probs);
  // Writes the position count; the file is incomplete until then.
  absl::Status Finish();

 private:
  ReferenceWriter(std::string path, int64_t vocab) : path_(std::move(path)), vocab_(vocab) {}
  std::string path_;
  int64_t vocab_ = 0;
  int64_t positions_ = 0;
  std::ofstream out_;
  std::vector<uint16_t> row_;
};

class ReferenceReader {
 public:
  // INVALID_ARGUMENT naming the file when it is not one, truncated, or of
  // another vocabulary than `vocab`.
  static absl::StatusOr<ReferenceReader> Open(const std::string& path, int64_t vocab);
  int64_t positions() const { return positions_; }
  // The next position's token and log-probabilities (in order).
  absl::StatusOr<model::TokenId> Next(std::vector<double>& log_probs);

 private:
  ReferenceReader(std::string path, int64_t vocab) : path_(std::move(path)), vocab_(vocab) {}
  std::string path_;
  int64_t vocab_ = 0;
  int64_t positions_ = 0;
  std::ifstream in_;
  std::vector<uint16_t> row_;
};

}  // namespace kvfleet::tools
