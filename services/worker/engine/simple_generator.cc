#include "services/worker/engine/simple_generator.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "services/worker/engine/sampler/sampler.h"

namespace kvfleet::engine {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

absl::Status SimpleGenerator::Validate(const GenerateRequest& r) const {
  const ExecutorInfo& info = executor_.info();
  if (r.prompt.empty()) return absl::InvalidArgumentError("the prompt is empty; send at least one token");
  RETURN_IF_ERROR(r.sampling.Validate());
  RETURN_IF_ERROR(r.stopping.Validate(info.vocab_size));
  for (model::TokenId t : r.prompt) {
    if (t < 0 || t >= info.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token id ", t, " is outside the vocabulary [0, ", info.vocab_size, ")"));
    }
  }
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.stopping.max_tokens;
  if (total > info.context_length) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", r.prompt.size(), " tokens and max_tokens is ",
                                                   r.stopping.max_tokens, ": ", total,
                                                   " exceeds the model's context length of ", info.context_length,
                                                   " tokens; shorten the prompt or lower max_tokens"));
  }
  if (total > info.num_blocks * info.block_size) {
    return absl::InvalidArgumentError(absl::StrCat("prompt + max_tokens = ", total, " tokens exceeds the KV cache (",
                                                   info.num_blocks * info.block_size, " tokens)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<GenerateResult> SimpleGenerator::Generate(const GenerateRequest& r,
                                                         const std::function<void(model::TokenId)>& on_token) {
  RETURN_IF_ERROR(Validate(r));
  GenerateResult result;
  result.seed = r.sampling.seed.value_or(std::random_device{}());
  Sampler sampler(r.sampling, result.seed, r.prompt);

  // One sequence: blocks 0..n-1 of the executor's cache in order.
  const int64_t bs = executor_.info().block_size;
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.stopping.max_tokens;
  std::vector<BlockId> table;
  for (int64_t b = 0; b < (total + bs - 1) / bs; ++b) table.emplace_back(static_cast<int32_t>(b));

  std::vector<model::TokenId> sequence = r.prompt;
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> last_logits;
  const int64_t chunk = std::max<int32_t>(1, r.prefill_chunk_tokens);
  for (int64_t pos = 0; pos < static_cast<int64_t>(r.prompt.size()); pos += chunk) {
    const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(r.prompt.size()) - pos);
    ForwardBatch batch;
    batch.chunks.push_back(
        {.tokens = std::span(r.prompt).subspan(pos, n),
         .start_position = static_cast<int32_t>(pos),
         .block_table = table,
         .logits = pos + n == static_cast<int64_t>(r.prompt.size()) ? LogitsWanted::kLast : LogitsWanted::kNone});
    ASSIGN_OR_RETURN(ForwardOutput out, executor_.Forward(batch));
    if (!out.logits.empty()) last_logits = std::move(out.logits);
  }
  result.prefill_seconds = SecondsSince(start);

  const auto decode_start = std::chrono::steady_clock::now();
  while (true) {
    const int64_t position = static_cast<int64_t>(sequence.size());
    const model::TokenId next = sampler.Sample(last_logits, position);
    sampler.Accept(next);
    sequence.push_back(next);
    result.tokens.push_back(next);
    on_token(next);
    const bool is_stop = std::find(r.stopping.stop_token_ids.begin(), r.stopping.stop_token_ids.end(), next) !=
                             r.stopping.stop_token_ids.end() ||
                         (!r.stopping.ignore_eos && std::find(r.end_of_turn_tokens.begin(), r.end_of_turn_tokens.end(),
                                                              next) != r.end_of_turn_tokens.end());
    if (is_stop) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
    if (static_cast<int32_t>(result.tokens.size()) >= r.stopping.max_tokens) {
      result.finish_reason = FinishReason::kLength;
      break;
    }
    ForwardBatch batch;
    batch.chunks.push_back({.tokens = std::span(sequence).subspan(position, 1),
                            .start_position = static_cast<int32_t>(position),
                            .block_table = table});
    ASSIGN_OR_RETURN(ForwardOutput out, executor_.Forward(batch));
    last_logits = std::move(out.logits);
  }
  result.decode_seconds = SecondsSince(decode_start);
  return result;
}

}  // namespace kvfleet::engine
