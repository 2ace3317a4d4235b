// The contract between the engine and a model executor for one step: which
// tokens of which sequences to compute, where their KV lives, and which
// tokens need logits. The batch owns flat arrays, built once per step, so a
// backend can copy them to a device in one transfer, launch asynchronously,
// or (later) broadcast them to tensor-parallel ranks; nothing in it points
// into request state.
//
// A chunk computes tokens at positions [start, start + n) of one sequence;
// the KV of positions before start must already be in the cache blocks of
// its block table (prefix hits, earlier chunks, earlier decode steps).
// Prefill chunks, decode tokens and speculative tokens are all chunks: one
// code path.
//
// Layout (T tokens, C chunks, R logits rows, W = max_blocks_per_chunk,
// G = num_kv_groups, the page groups of model/arch/kv_page_groups.h):
//   token_ids, positions, token_chunk  [T]  int32
//   kv_slots                           [G, T]  int64: page * block_size + slot of the token's new K/V
//   chunk_starts                       [C + 1]: chunk c owns tokens [chunk_starts[c], chunk_starts[c + 1])
//   block_table                        [G, C, W] int32 physical page ids; entries past a chunk's
//                                      context are -1; a window group's freed
//                                      entries name the null page
//   chunk_logits_starts                [C + 1]: chunk c's logits rows are [chunk_logits_starts[c], ...[c + 1])
//   logits_tokens                      [R]  the token (index into T) each logits row projects; ascending
//   chunk_lora                         [C] int32, or empty: the executor's LoRA slot each chunk
//                                      runs under (ModelExecutor::LoadLora), -1 for the base
//                                      model; empty when every chunk runs the base model
//   tree_masks                         [T] uint64, or empty: which nodes of its tree verify chunk a
//                                      token sees (kernels/common/paged_kv.h, "Tree verification");
//                                      empty when no chunk is a tree
//
//   ForwardBatchBuilder builder(/*block_size=*/16);
//   builder.AddChunk(prompt, /*start_position=*/0, table, LogitsWanted::kLast);
//   ASSIGN_OR_RETURN(ForwardOutput out, executor.Forward(builder.Finish()));
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/ids.h"
#include "engine/executor/executor_options.h"
#include "model/token_id.h"

namespace kvfleet::engine {

enum class LogitsWanted { kNone, kLast, kAll };

struct ForwardBatch {
  // 0: the whole model. L > 0: only the first L layers, then the final norm
  // and the output head on their result (self-speculative drafting). The KV
  // written for those layers is what the full model writes for them.
  int32_t num_layers = 0;
  int32_t block_size = 0;
  int32_t max_blocks_per_chunk = 0;
  int32_t num_kv_groups = 1;
  // Whether ForwardOutput::hidden must be filled: an executor for which
  // exporting the output head's input costs a copy (CUDA) skips it when no
  // proposer drafts from hidden states.
  bool want_hidden = true;

  std::vector<int32_t> token_ids;
  std::vector<int32_t> positions;
  std::vector<int32_t> token_chunk;
  std::vector<int64_t> kv_slots;
  std::vector<int32_t> chunk_starts{0};
  std::vector<int32_t> block_table;
  std::vector<int32_t> chunk_logits_starts{0};
  std::vector<int32_t> logits_tokens;
  std::vector<uint64_t> tree_masks;
  std::vector<int32_t> chunk_lora;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_chunks() const { return static_cast<int32_t>(chunk_starts.size()) - 1; }
  int32_t num_logits_rows() const { return static_cast<int32_t>(logits_tokens.size()); }
  int32_t chunk_size(int32_t c) const { return chunk_starts[c + 1] - chunk_starts[c]; }
  // Chunk c's LoRA slot; -1: the base model.
  int32_t lora_slot(int32_t c) const { return chunk_lora.empty() ? -1 : chunk_lora[c]; }
  // The logits row of chunk c's first row (its last token's, for kLast).
  int32_t first_logits_row(int32_t c) const { return chunk_logits_starts[c]; }
  // One past the chunk's last cache index: how far its KV reaches (a tree
  // chunk's nodes are stored one after another, whatever their depth).
  int32_t chunk_end_position(int32_t c) const { return positions[chunk_starts[c]] + chunk_size(c); }
  // Entries of one page group's block table: C × W.
  int64_t group_table_size() const { return static_cast<int64_t>(num_chunks()) * max_blocks_per_chunk; }
  std::span<const int32_t> BlockTableRow(int32_t c, int32_t group = 0) const {
    return {block_table.data() + group * group_table_size() + static_cast<size_t>(c) * max_blocks_per_chunk,
            static_cast<size_t>(max_blocks_per_chunk)};
  }

  // Checks the batch against an executor's cache and model: INVALID_ARGUMENT
  // naming the chunk for a token outside the vocabulary, a position past the
  // context, a block table that does not cover its chunk or names a page
  // outside the cache's num_pages (the null page included), a group count
  // other than the cache's, num_layers outside [0, model_layers], or a tree
  // mask that is not a path from its chunk's root.
  absl::Status Validate(int64_t vocab_size, int64_t context_length, int64_t num_pages, int64_t model_layers,
                        int32_t kv_groups = 1) const;

 private:
  absl::Status ValidateTrees() const;
};

// INVALID_ARGUMENT when the batch is larger than an executor takes (its
// scratch is sized for those limits).
absl::Status CheckBatchLimits(const ForwardBatch& batch, const ExecutorLimits& limits);

// Builds a ForwardBatch chunk by chunk. Finish() lays out the block table
// (its width is only known once every chunk is in). Clear() keeps every
// array's capacity, so an engine that reuses one builder allocates nothing in
// a steady state.
class ForwardBatchBuilder {
 public:
  // With kv_groups > 1, a request's table interleaves its groups (logical
  // block i of group g at i · kv_groups + g) and a negative entry (a window
  // page already freed) becomes null_page.
  explicit ForwardBatchBuilder(int32_t block_size, int32_t kv_groups = 1, int32_t null_page = -1)
      : block_size_(block_size), kv_groups_(kv_groups), null_page_(null_page) {
    Clear();
  }

  void Clear(int32_t num_layers = 0);
  // `block_table` must cover positions [0, start_position + tokens.size());
  // entries past that are not copied.
  //
  // `tree_parents` (empty: a chain) makes the chunk a tree verify chunk:
  // tokens[0] is the root and tree_parents[i] the node index of token i's
  // parent (-1 for the root, else below i). Node i is stored at
  // start_position + i and sits at position start_position + its depth.
  //
  // `lora_slot` (-1: the base model) is the executor's slot of the adapter
  // the chunk's request runs under.
  void AddChunk(std::span<const model::TokenId> tokens, int32_t start_position, std::span<const BlockId> block_table,
                LogitsWanted logits, std::span<const int32_t> tree_parents = {}, int32_t lora_slot = -1);
  // Clear() sets it back to true.
  void SetWantHidden(bool want) { batch_.want_hidden = want; }
  const ForwardBatch& Finish();

 private:
  int32_t block_size_;
  int32_t kv_groups_;
  int32_t null_page_;
  // Each group's kv_slots until Finish lays them out group-major.
  std::vector<int64_t> staged_slots_;
  ForwardBatch batch_;
  // Each chunk's table entries, concatenated, until Finish places them.
  std::vector<int32_t> staged_tables_;
  std::vector<int32_t> staged_table_starts_;
};

// A view of an executor's logits for the last batch: rows in the batch's
// logits-row order, [num_rows, vocab_size]; and of the hidden states the
// output head read for them (after the final norm), [num_rows,
// hidden_size], which draft heads start from (null when the batch did not
// want them and exporting them costs). Valid until the executor's next
// Forward.
struct ForwardOutput {
  int64_t vocab_size = 0;
  int64_t num_rows = 0;
  const float* logits = nullptr;
  int64_t hidden_size = 0;
  const float* hidden = nullptr;

  std::span<const float> Row(int64_t row) const { return {logits + row * vocab_size, static_cast<size_t>(vocab_size)}; }
  std::span<const float> HiddenRow(int64_t row) const {
    return {hidden + row * hidden_size, static_cast<size_t>(hidden_size)};
  }
};

}  // namespace kvfleet::engine
