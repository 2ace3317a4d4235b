#include "tools/load/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace kvfleet::load {

namespace {

using nlohmann::json;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

absl::StatusOr<int64_t> IntIn(const json& v, int64_t lo, int64_t hi) {
  const std::string range = absl::StrCat("must be an integer in [", lo, ", ", hi, "], got ", v.dump());
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    // nlohmann stores every non-negative integer as unsigned.
    if (u > static_cast<uint64_t>(hi) || static_cast<int64_t>(u) < lo) return absl::InvalidArgumentError(range);
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) return absl::InvalidArgumentError(range);
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) return absl::InvalidArgumentError(range);
  return i;
}

absl::Status ReadPrompt(const json& v, LoadRequest& r) {
  if (!v.is_array() || v.empty()) return absl::InvalidArgumentError("must be a non-empty array of token ids");
  for (size_t i = 0; i < v.size(); ++i) {
    absl::StatusOr<int64_t> id = IntIn(v[i], 0, kInt32Max);
    if (!id.ok()) return absl::InvalidArgumentError(absl::StrCat("element ", i, " ", id.status().message()));
    r.prompt_token_ids.push_back(static_cast<int32_t>(*id));
  }
  return absl::OkStatus();
}

// Sets the field `key` of `r` from `v`.
absl::Status ReadField(const std::string& key, const json& v, LoadRequest& r) {
  if (key == "prompt_token_ids") return ReadPrompt(v, r);
  if (key == "max_tokens") {
    ASSIGN_OR_RETURN(int64_t n, IntIn(v, 1, kInt32Max));
    r.max_tokens = static_cast<int32_t>(n);
  } else if (key == "temperature") {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("must be a number >= 0, got ", v.dump()));
    }
    r.temperature = v.get<float>();
  } else if (key == "seed") {
    if (v.is_null()) return absl::OkStatus();
    if (!v.is_number_unsigned())
      return absl::InvalidArgumentError(absl::StrCat("must be an integer >= 0, got ", v.dump()));
    r.seed = v.get<uint64_t>();
  } else if (key == "ignore_eos") {
    if (!v.is_boolean()) return absl::InvalidArgumentError(absl::StrCat("must be true or false, got ", v.dump()));
    r.ignore_eos = v.get<bool>();
  } else {
    return absl::InvalidArgumentError(
        "unknown field (known: prompt_token_ids, max_tokens, temperature, seed, ignore_eos)");
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadRequest> ParseLine(absl::string_view line) {
  json object;
  // nlohmann reports syntax errors only by exception; it stops here.
  try {
    object = json::parse(line.begin(), line.end());
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("not JSON: ", e.what()));
  }
  if (!object.is_object()) return absl::InvalidArgumentError("not a JSON object");
  LoadRequest r;
  for (const auto& [key, value] : object.items()) {
    if (absl::Status s = ReadField(key, value, r); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("field \"", key, "\": ", s.message()));
    }
  }
  if (!object.contains("prompt_token_ids")) return absl::InvalidArgumentError("field \"prompt_token_ids\" is required");
  if (!object.contains("max_tokens")) return absl::InvalidArgumentError("field \"max_tokens\" is required");
  return r;
}

// Draws from [lo, hi) by modulo: slightly biased, but the same on every
// standard library, which std::uniform_int_distribution is not.
int32_t Draw(std::mt19937_64& rng, int32_t lo, int32_t hi) {
  return lo + static_cast<int32_t>(rng() % static_cast<uint64_t>(hi - lo));
}

}  // namespace

absl::StatusOr<std::vector<LoadRequest>> ParseWorkloadJsonl(const std::string& text) {
  std::vector<LoadRequest> requests;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    absl::StatusOr<LoadRequest> r = ParseLine(line);
    if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": ", r.status().message()));
    requests.push_back(*std::move(r));
  }
  return requests;
}

absl::StatusOr<std::vector<LoadRequest>> ReadWorkloadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open workload file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<LoadRequest>> requests = ParseWorkloadJsonl(text.str());
  if (!requests.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", requests.status().message()));
  if (requests->empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no requests"));
  return requests;
}

absl::Status GeneratorOptions::Validate() const {
  if (num_requests < 1) return absl::InvalidArgumentError("the generator needs num_requests >= 1");
  if (prompt_tokens < 1) return absl::InvalidArgumentError("the generator needs prompt_tokens >= 1");
  if (shared_prefix_tokens < 0 || shared_prefix_tokens > prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared_prefix_tokens must be in [0, prompt_tokens = ", prompt_tokens, "], got ", shared_prefix_tokens));
  }
  if (max_tokens < 1) return absl::InvalidArgumentError("the generator needs max_tokens >= 1");
  if (vocab_size < 2) return absl::InvalidArgumentError(absl::StrCat("vocab_size must be >= 2, got ", vocab_size));
  if (min_token_id < 0) return absl::InvalidArgumentError("min_token_id must be >= 0");
  if (!(temperature >= 0)) return absl::InvalidArgumentError("temperature must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LoadRequest>> GenerateWorkload(const GeneratorOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  const int32_t lo = std::min(options.min_token_id, options.vocab_size / 2);
  std::mt19937_64 rng(options.seed);
  std::vector<int32_t> prefix(static_cast<size_t>(options.shared_prefix_tokens));
  for (int32_t& t : prefix) t = Draw(rng, lo, options.vocab_size);

  std::vector<LoadRequest> requests(static_cast<size_t>(options.num_requests));
  for (size_t i = 0; i < requests.size(); ++i) {
    LoadRequest& r = requests[i];
    r.prompt_token_ids = prefix;
    while (r.prompt_token_ids.size() < static_cast<size_t>(options.prompt_tokens)) {
      r.prompt_token_ids.push_back(Draw(rng, lo, options.vocab_size));
    }
    r.max_tokens = options.max_tokens;
    r.temperature = options.temperature;
    r.seed = options.seed + i;
    r.ignore_eos = options.ignore_eos;
  }
  return requests;
}

}  // namespace kvfleet::load
