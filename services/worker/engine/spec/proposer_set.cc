#include "services/worker/engine/spec/proposer_set.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "model/llama_model.h"
#include "services/worker/engine/executor/cpu_executor.h"
#include "services/worker/engine/spec/draft_model_proposer.h"
#include "services/worker/engine/spec/self_speculative_proposer.h"

namespace kvfleet::engine::spec {
namespace {

absl::StatusOr<std::unique_ptr<Proposer>> LoadDraftModel(const ProposerConfig& config, ModelExecutor& target) {
  absl::StatusOr<std::unique_ptr<model::LlamaModel>> loaded = model::LlamaModel::Load(config.draft_model_path);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(), absl::StrCat("the draft model (--spec-draft-model) did not load: ",
                                                             loaded.status().message()));
  }
  std::shared_ptr<const model::LlamaModel> draft_model = std::move(*loaded);
  // The draft's own cache: as many blocks as the target's, so every request
  // the target holds can be drafted for.
  ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutor> executor,
                   CpuExecutor::Create(*draft_model, {.num_blocks = target.info().num_blocks,
                                                      .block_size = target.info().block_size,
                                                      .num_threads = config.num_threads}));
  KVFLEET_LOG_INFO("draft model {}: {} layers, {} KV blocks of {} tokens", config.draft_model_path,
                   draft_model->hparams().num_layers, target.info().num_blocks, target.info().block_size);
  ASSIGN_OR_RETURN(std::unique_ptr<DraftModelProposer> proposer,
                   DraftModelProposer::Create(draft_model, std::move(executor), target.info()));
  return std::unique_ptr<Proposer>(std::move(proposer));
}

}  // namespace

std::vector<std::string> ProposerConfig::names() const {
  std::vector<std::string> out = {"ngram"};
  if (self_layers > 0) out.push_back("self");
  if (!draft_model_path.empty()) out.push_back("draft");
  return out;
}

absl::StatusOr<ProposerSet> ProposerSet::Load(const ProposerConfig& config, ModelExecutor& target) {
  ProposerSet set;
  RETURN_IF_ERROR(config.ngram.Validate());
  set.proposers_.push_back(std::make_unique<NgramProposer>(config.ngram));
  if (config.self_layers > 0) {
    RETURN_IF_ERROR(SelfSpeculativeProposer::ValidateLayers(target.info(), config.self_layers));
    set.proposers_.push_back(std::make_unique<SelfSpeculativeProposer>(target, config.self_layers));
  }
  if (!config.draft_model_path.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<Proposer> draft, LoadDraftModel(config, target));
    set.proposers_.push_back(std::move(draft));
  }
  return set;
}

std::vector<Proposer*> ProposerSet::pointers() const {
  std::vector<Proposer*> out;
  for (const auto& p : proposers_) out.push_back(p.get());
  return out;
}


}  // namespace kvfleet::engine::spec
