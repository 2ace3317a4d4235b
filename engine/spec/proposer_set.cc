#include "engine/spec/proposer_set.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/heads_proposer.h"
#include "engine/spec/self_speculative_proposer.h"
#include "model/model_fingerprint.h"
#include "model/tokenizer/same_tokenizer.h"

namespace kvfleet::engine::spec {

std::vector<std::string> ProposerConfig::names() const {
  std::vector<std::string> out = {"ngram", "suffix"};
  if (self_layers > 0) out.push_back("self");
  if (!draft_model_path.empty()) out.push_back("draft");
  if (!draft_heads_path.empty()) out.push_back("heads");
  return out;
}

absl::StatusOr<std::unique_ptr<DraftModel>> ProposerSet::LoadDraftModel(const ProposerConfig& config,
                                                                        const ExecutorInfo& target,
                                                                        const TargetModel& target_model,
                                                                        const ExecutorFactory& create) {
  if (config.draft_model_path.empty()) return std::unique_ptr<DraftModel>();
  absl::StatusOr<std::unique_ptr<model::Model>> loaded = model::Model::Load(config.draft_model_path);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat("the draft model (--spec-draft-model) did not load: ", loaded.status().message()));
  }
  if (absl::Status same = model::SameTokenizer(target_model.model.vocabulary(), (*loaded)->vocabulary()); !same.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the draft model (--spec-draft-model) ", config.draft_model_path,
        " does not share the tokenizer of the target ", std::string(target_model.path), ": ", same.message(),
        " (the first is the target, the second the draft). A draft must come from the target's family, with the "
        "same tokenizer, e.g. Qwen2.5-Coder-0.5B for Qwen2.5-Coder-1.5B, or be cut from the target by kvfleet "
        "make-draft"));
  }
  auto draft = std::make_unique<DraftModel>();
  draft->model = std::move(*loaded);
  // The draft only ever needs its last token's logits per chunk.
  ExecutorLimits limits = target.limits;
  limits.max_logits_rows = limits.max_batch_chunks;
  ASSIGN_OR_RETURN(draft->executor, create(*draft->model, {.device = target.device,
                                                           .block_size = target.block_size,
                                                           .num_threads = config.num_threads,
                                                           .cpu_activations = config.cpu_activations,
                                                           // its own pool keeps one table a sequence
                                                           .free_window_blocks = false,
                                                           .limits = limits}));
  return draft;
}

absl::StatusOr<ProposerSet> ProposerSet::Build(const ProposerConfig& config, ModelExecutor& target,
                                               const TargetModel& target_model, std::unique_ptr<DraftModel> draft) {
  ProposerSet set;
  RETURN_IF_ERROR(config.ngram.Validate());
  set.proposers_.push_back(std::make_unique<NgramProposer>(config.ngram));
  RETURN_IF_ERROR(config.suffix.Validate());
  set.proposers_.push_back(std::make_unique<SuffixProposer>(config.suffix));
  if (config.self_layers > 0) {
    RETURN_IF_ERROR(SelfSpeculativeProposer::ValidateLayers(target.info(), config.self_layers));
    set.proposers_.push_back(std::make_unique<SelfSpeculativeProposer>(target, config.self_layers));
  }
  if (!config.draft_model_path.empty()) {
    if (draft == nullptr) return absl::InvalidArgumentError("a draft model is configured but was not loaded");
    KVFLEET_LOG_INFO("draft model {}: {} layers, {} KV blocks of {} tokens", config.draft_model_path,
                     draft->model->config().num_layers, draft->executor->info().num_blocks,
                     draft->executor->info().block_size);
    ASSIGN_OR_RETURN(std::unique_ptr<DraftModelProposer> proposer,
                     DraftModelProposer::Create(std::move(draft->model), std::move(draft->executor), target.info()));
    set.proposers_.push_back(std::move(proposer));
  }
  if (!config.draft_heads_path.empty()) {
    ASSIGN_OR_RETURN(
        std::shared_ptr<const model::DraftHeads> heads,
        model::DraftHeads::Load(
            config.draft_heads_path, target_model.model, target_model.path,
            target_model.fingerprint.empty() ? model::ModelFingerprint(target_model.model) : target_model.fingerprint));
    KVFLEET_LOG_INFO("draft heads {}: {} heads over a draft vocabulary of {} tokens, on the target's executor",
                     config.draft_heads_path, heads->num_heads(), heads->vocab_size());
    ASSIGN_OR_RETURN(std::unique_ptr<HeadsProposer> proposer,
                     HeadsProposer::Create(std::move(heads), target, config.heads_top_k));
    set.proposers_.push_back(std::move(proposer));
  }
  return set;
}

absl::StatusOr<ProposerSet> ProposerSet::Load(const ProposerConfig& config, ModelExecutor& target,
                                              const TargetModel& target_model, const ExecutorFactory& create) {
  ASSIGN_OR_RETURN(std::unique_ptr<DraftModel> draft, LoadDraftModel(config, target.info(), target_model, create));
  if (draft != nullptr) RETURN_IF_ERROR(draft->executor->AllocateKvCache(target.info().num_blocks));
  return Build(config, target, target_model, std::move(draft));
}

std::vector<Proposer*> ProposerSet::pointers() const {
  std::vector<Proposer*> out;
  for (const auto& p : proposers_) out.push_back(p.get());
  return out;
}

}  // namespace kvfleet::engine::spec
