#include "engine/spec/draft_heads.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/quantize.h"
#include "model/hf/json_config_reader.h"
#include "model/hf/safetensors_file.h"

namespace kvfleet::engine::spec {
namespace {

constexpr char kFormat[] = "kvfleet-draft-heads-v1";

// Four independent accumulators: one chain of fused multiply-adds would
// wait on its own latency, and the heads' products are all dot products.
float Dot(const float* a, const float* b, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
  const __m256 sum4 = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum4);
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

absl::StatusOr<std::vector<float>> ReadTensor(const model::SafetensorsFile& file, const std::string& name,
                                              std::vector<int64_t> shape, const std::string& dir) {
  for (const model::TensorView& t : file.tensors()) {
    if (t.name != name) continue;
    if (t.shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat("draft heads ", dir, ": tensor ", name, " has the wrong shape"));
    }
    std::vector<float> out(static_cast<size_t>(t.num_elements));
    kernels::DequantizeRow(t.dtype, t.data, out.data(), t.num_elements);
    return out;
  }
  return absl::InvalidArgumentError(absl::StrCat("draft heads ", dir, ": tensor ", name, " is missing"));
}

}  // namespace

absl::StatusOr<DraftHeads> DraftHeads::Load(const std::string& dir, const model::Model& target,
                                            std::string_view target_path, std::string_view target_fingerprint) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  absl::StatusOr<nlohmann::json> config = model::ReadJsonFile(config_path);
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft heads (--spec-draft-heads) ", dir, " did not load: ", config.status().message()));
  }
  const nlohmann::json& c = *config;
  const std::string target_name(target_path);
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("draft heads ", config_path, ": ", what));
  };
  if (!c.contains("format") || c["format"] != kFormat) return bad(absl::StrCat("\"format\" is not \"", kFormat, "\""));
  for (const char* key : {"hidden_size", "num_heads"}) {
    if (!c.contains(key) || !c[key].is_number_integer() || c[key].get<int64_t>() < 1) {
      return bad(absl::StrCat("\"", key, "\" must be a positive integer"));
    }
  }
  if (!c.contains("target_fingerprint") || !c["target_fingerprint"].is_string()) {
    return bad("\"target_fingerprint\" is missing");
  }
  if (!c.contains("vocab_ids") || !c["vocab_ids"].is_array() || c["vocab_ids"].empty()) {
    return bad("\"vocab_ids\" must be a non-empty list of token ids");
  }
  DraftHeads heads;
  heads.hidden_ = c["hidden_size"].get<int64_t>();
  if (heads.hidden_ != target.config().hidden_size) {
    return bad(absl::StrCat("the heads take hidden states of ", heads.hidden_, " values and the target ", target_name,
                            " has ", target.config().hidden_size));
  }
  const std::string fingerprint(target_fingerprint);
  if (c["target_fingerprint"].get<std::string>() != fingerprint) {
    return bad(absl::StrCat("the heads were trained for the model of fingerprint ",
                            c["target_fingerprint"].get<std::string>(), ", not for the target ", target_name,
                            " (fingerprint ", fingerprint, "); train heads for it with tools/heads"));
  }
  const model::WeightView& head = target.weights().output;
  for (const nlohmann::json& id : c["vocab_ids"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= head.rows) {
      return bad(absl::StrCat("a vocab id is not a token of the target (0 to ", head.rows - 1, ")"));
    }
    heads.vocab_ids_.push_back(static_cast<model::TokenId>(id.get<int64_t>()));
  }
  const std::string weights_path = (std::filesystem::path(dir) / "heads.safetensors").string();
  ASSIGN_OR_RETURN(std::unique_ptr<model::SafetensorsFile> file, model::SafetensorsFile::Open(weights_path));
  const int64_t k = c["num_heads"].get<int64_t>();
  for (int64_t i = 0; i < k; ++i) {
    ASSIGN_OR_RETURN(std::vector<float> w,
                     ReadTensor(*file, absl::StrCat("head.", i, ".weight"), {heads.hidden_, heads.hidden_}, dir));
    ASSIGN_OR_RETURN(std::vector<float> b, ReadTensor(*file, absl::StrCat("head.", i, ".bias"), {heads.hidden_}, dir));
    heads.weights_.push_back(std::move(w));
    heads.biases_.push_back(std::move(b));
  }
  // The target's output head, for the draft vocabulary only.
  heads.head_rows_.resize(heads.vocab_ids_.size() * static_cast<size_t>(heads.hidden_));
  const int64_t row_bytes = RowBytes(head.dtype, head.cols);
  for (size_t v = 0; v < heads.vocab_ids_.size(); ++v) {
    kernels::DequantizeRow(head.dtype, static_cast<const uint8_t*>(head.data) + heads.vocab_ids_[v] * row_bytes,
                           heads.head_rows_.data() + v * static_cast<size_t>(heads.hidden_), head.cols);
  }
  return heads;
}

int64_t DraftHeads::bytes() const {
  return static_cast<int64_t>((weights_.size() * (hidden_ + 1) * hidden_ + head_rows_.size()) * sizeof(float));
}

std::vector<std::vector<TreeCandidate>> DraftHeads::Candidates(std::span<const float> hidden, int32_t count,
                                                               int32_t top_k) const {
  const int64_t h = hidden_;
  const int32_t n = std::max(0, std::min(count, num_heads()));
  std::vector<float> states(static_cast<size_t>(n * h));
  for (int32_t i = 0; i < n; ++i) {
    float* out = states.data() + i * h;
    for (int64_t r = 0; r < h; ++r) {
      const float u = Dot(weights_[i].data() + r * h, hidden.data(), h) + biases_[i][r];
      out[r] = hidden[r] + u / (1.0f + std::exp(-u));
    }
  }
  // One pass over the draft vocabulary's rows for every head.
  const int64_t vocab = vocab_size();
  std::vector<float> logits(static_cast<size_t>(n * vocab));
  for (int64_t v = 0; v < vocab; ++v) {
    const float* row = head_rows_.data() + v * h;
    for (int32_t i = 0; i < n; ++i) logits[static_cast<size_t>(i * vocab + v)] = Dot(row, states.data() + i * h, h);
  }
  std::vector<std::vector<TreeCandidate>> heads(static_cast<size_t>(n));
  const size_t k = static_cast<size_t>(std::clamp<int64_t>(top_k, 0, vocab));
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < n; ++i) {
    const float* l = logits.data() + i * vocab;
    float max_logit = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v) max_logit = std::max(max_logit, l[v]);
    if (!std::isfinite(max_logit)) continue;
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(l[v] - max_logit));
    std::iota(order.begin(), order.end(), int64_t{0});
    // Ties go to the lower draft-vocabulary index, as a plain argmax would.
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [l](int64_t a, int64_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    for (size_t j = 0; j < k; ++j) {
      const int64_t v = order[j];
      heads[static_cast<size_t>(i)].push_back(
          {.token = vocab_ids_[v], .probability = std::exp(static_cast<double>(l[v] - max_logit)) / sum});
    }
  }
  return heads;
}

}  // namespace kvfleet::engine::spec
