// The proposers a worker loads, built from its configuration: the n-gram
// proposer always (it costs nothing until used), self-speculation when a
// layer count is given, a draft model when a path is given. Owns them (and
// the draft model's weights and cache); the engine borrows pointers.
//
//   ASSIGN_OR_RETURN(ProposerSet set, ProposerSet::Load(config, target_executor));
//   engine_options.proposers = set.pointers();
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/worker/engine/executor/model_executor.h"
#include "services/worker/engine/spec/ngram_proposer.h"
#include "services/worker/engine/spec/proposer.h"

namespace kvfleet::engine::spec {

struct ProposerConfig {
  NgramProposerOptions ngram;
  int32_t self_layers = 0;        // > 0: load "self" with the target's first self_layers layers
  std::string draft_model_path;   // non-empty: load "draft" from this GGUF
  int num_threads = 0;            // the draft model's CPU threads (0: all)

  // The names of the proposers Load() builds from this configuration.
  std::vector<std::string> names() const;
};

class ProposerSet {
 public:
  // INVALID_ARGUMENT for a bad layer count or n-gram range, a draft model
  // that does not load or whose vocabulary differs from the target's.
  static absl::StatusOr<ProposerSet> Load(const ProposerConfig& config, ModelExecutor& target);

  std::vector<Proposer*> pointers() const;

 private:
  std::vector<std::unique_ptr<Proposer>> proposers_;
};

}  // namespace kvfleet::engine::spec
