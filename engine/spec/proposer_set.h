// The proposers a worker loads, built from its configuration: the n-gram
// and suffix proposers always (they cost nothing until used, but for the
// suffix store's bounded memory), self-speculation when a
// layer count is given, a draft model when a path is given, draft heads
// when their directory is given. Owns them (and
// the draft model's weights and cache); the engine borrows pointers.
//
// A draft model loads in two steps so the worker's memory plan can size its
// KV cache with the target's: LoadDraftModel (weights and scratch on the
// target's device), then AllocateKvCache on its executor, then Build.
// Load does all three with a cache as large as the target's, for tools and
// tests.
//
//   ASSIGN_OR_RETURN(ProposerSet set, ProposerSet::Load(config, target_executor,
//                                                       {model, path}, CreateExecutor));
//   engine_options.proposers = set.pointers();
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/model_executor.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/proposer.h"
#include "engine/spec/suffix_proposer.h"
#include "model/model.h"

namespace kvfleet::engine::spec {

struct ProposerConfig {
  NgramProposerOptions ngram;
  SuffixProposerOptions suffix;
  int32_t self_layers = 0;       // > 0: load "self" with the target's first self_layers layers
  std::string draft_model_path;  // non-empty: load "draft" from this GGUF
  std::string draft_heads_path;  // non-empty: load "heads" from this directory (model/draft_heads.h)
  int32_t heads_top_k = 1;       // > 1: the heads draft a tree of each head's top k (heads_proposer.h)
  int num_threads = 0;           // the draft model's CPU threads (0: all)
  // The draft model's activations on the CPU: the target's, so the two
  // compute alike (--cpu-activations).
  CpuActivations cpu_activations = CpuActivations::kF32;

  // The names of the proposers Load() builds from this configuration.
  std::vector<std::string> names() const;
};

// What a draft must agree with: the target's tokenizer (a draft model),
// its exact weights (draft heads). The path is named in errors.
struct TargetModel {
  const model::Model& model;
  std::string_view path;
  // The target's fingerprint (model/model_fingerprint.h), which the
  // worker computes once at start; empty: computed here when heads need it.
  std::string fingerprint;
};

// A draft model's weights and its executor (on the target's device).
struct DraftModel {
  std::shared_ptr<const model::Model> model;
  std::unique_ptr<ModelExecutor> executor;
};

class ProposerSet {
 public:
  // The draft model of config.draft_model_path (null when none is set), with
  // the target's device, block size and batch limits and no KV cache yet.
  // An error names the flag when the file does not load, and both files
  // when the draft's tokenizer is not the target's (token texts, merges,
  // special ids: model/tokenizer/same_tokenizer.h).
  static absl::StatusOr<std::unique_ptr<DraftModel>> LoadDraftModel(const ProposerConfig& config,
                                                                    const ExecutorInfo& target,
                                                                    const TargetModel& target_model,
                                                                    const ExecutorFactory& create);
  // INVALID_ARGUMENT for a bad layer count or n-gram range, or a draft whose
  // vocabulary differs from the target's. `draft` (its KV cache allocated)
  // must be given when the configuration names one.
  static absl::StatusOr<ProposerSet> Build(const ProposerConfig& config, ModelExecutor& target,
                                           const TargetModel& target_model, std::unique_ptr<DraftModel> draft);
  // LoadDraftModel, a draft cache of the target's block count, then Build.
  static absl::StatusOr<ProposerSet> Load(const ProposerConfig& config, ModelExecutor& target,
                                          const TargetModel& target_model, const ExecutorFactory& create);

  std::vector<Proposer*> pointers() const;

 private:
  std::vector<std::unique_ptr<Proposer>> proposers_;
};

}  // namespace kvfleet::engine::spec
