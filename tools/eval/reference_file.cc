#include "tools/eval/reference_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/float16.h"

namespace kvfleet::tools {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'F', 'E', 'V', 'A', 'L', '1'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kHeaderBytes = 8 + 4 + 8 + 8;
constexpr std::streamoff kPositionsAt = 8 + 4 + 8;

}  // namespace

absl::StatusOr<ReferenceWriter> ReferenceWriter::Create(const std::string& path, int64_t vocab) {
  ReferenceWriter w(path, vocab);
  w.out_.open(path, std::ios::binary | std::ios::trunc);
  if (!w.out_) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot be written"));
  const int64_t positions = 0;
  w.out_.write(kMagic, sizeof(kMagic));
  w.out_.write(reinterpret_cast<const char*>(&kVersion), sizeof(kVersion));
  w.out_.write(reinterpret_cast<const char*>(&vocab), sizeof(vocab));
  w.out_.write(reinterpret_cast<const char*>(&positions), sizeof(positions));
  w.row_.resize(static_cast<size_t>(vocab));
  return w;
}

absl::Status ReferenceWriter::Add(model::TokenId next, std::span<const double> log_probs) {
  if (static_cast<int64_t>(log_probs.size()) != vocab_)
    return absl::InvalidArgumentError("a row of another vocabulary");
  for (size_t i = 0; i < log_probs.size(); ++i) row_[i] = FloatToHalf(static_cast<float>(log_probs[i]));
  const int32_t token = next;
  out_.write(reinterpret_cast<const char*>(&token), sizeof(token));
  out_.write(reinterpret_cast<const char*>(row_.data()), static_cast<std::streamsize>(row_.size() * 2));
  ++positions_;
  return out_ ? absl::OkStatus() : absl::InternalError(absl::StrCat(path_, ": write failed"));
}

absl::Status ReferenceWriter::Finish() {
  out_.seekp(kPositionsAt);
  out_.write(reinterpret_cast<const char*>(&positions_), sizeof(positions_));
  out_.close();
  return out_ ? absl::OkStatus() : absl::InternalError(absl::StrCat(path_, ": write failed"));
}

absl::StatusOr<ReferenceReader> ReferenceReader::Open(const std::string& path, int64_t vocab) {
  ReferenceReader r(path, vocab);
  r.in_.open(path, std::ios::binary);
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", what, " (write one with kvfleet eval --save-reference)"));
  };
  if (!r.in_) return bad("cannot be read");
  char magic[8];
  uint32_t version = 0;
  int64_t file_vocab = 0;
  r.in_.read(magic, sizeof(magic));
  r.in_.read(reinterpret_cast<char*>(&version), sizeof(version));
  r.in_.read(reinterpret_cast<char*>(&file_vocab), sizeof(file_vocab));
  r.in_.read(reinterpret_cast<char*>(&r.positions_), sizeof(r.positions_));
  if (!r.in_ || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0 || version != kVersion) {
    return bad("not a kvfleet evaluation reference");
  }
  if (file_vocab != vocab) {
    return bad(absl::StrCat("its distributions are over ", file_vocab, " tokens; the model has ", vocab));
  }
  std::error_code ec;
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec || r.positions_ < 0 || size != kHeaderBytes + r.positions_ * (4 + 2 * vocab)) {
    return bad("truncated or unfinished");
  }
  r.row_.resize(static_cast<size_t>(vocab));
  return r;
}

absl::StatusOr<model::TokenId> ReferenceReader::Next(std::vector<double>& log_probs) {
  int32_t token = 0;
  in_.read(reinterpret_cast<char*>(&token), sizeof(token));
  in_.read(reinterpret_cast<char*>(row_.data()), static_cast<std::streamsize>(row_.size() * 2));
  if (!in_) return absl::OutOfRangeError(absl::StrCat(path_, ": no more positions"));
  // Renormalised after the rounding, so that the row is a distribution
  // again (a KL divergence from it is then never negative).
  log_probs.resize(row_.size());
  double max = -INFINITY;
  for (size_t i = 0; i < row_.size(); ++i) max = std::max(max, log_probs[i] = HalfToFloat(row_[i]));
  double sum = 0.0;
  for (double v : log_probs) sum += std::exp(v - max);
  const double log_z = max + std::log(sum);
  for (double& v : log_probs) v -= log_z;
  return token;
}

}  // namespace kvfleet::tools
