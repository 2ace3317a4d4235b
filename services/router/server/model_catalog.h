// The models a router serves, learnt from its workers: for each model id,
// the card its router side is built from (tokenizer, chat template,
// context length, generation defaults; model/model_card.h) and the
// fingerprint of the weights behind it.
//
// Learning. The first worker of a model that the pool admits is asked for
// the model's card (the Worker service's DescribeModel, streamed); later
// workers with the same fingerprint reuse it. Router models are kept by
// fingerprint, so a model whose workers come back is not fetched again.
//
// One id, one set of weights, one card. Block hashes chain from the model
// id and the fingerprint (common/block_hash.h), and the router hashes a
// request once for every worker it may go to, so a worker that reports a
// model id already served with other weights is refused, naming both
// workers, until every worker holding the old weights has left. So is one
// whose card differs (another --chat-template or --served-model-name: the
// card's digest, WorkerInfo.model_card_digest), so that a changed template
// reaches the router once the old workers are gone. A served name that
// another model with workers answers to is refused the same way.
//
// Adapters. Each admitted worker's probe reports the LoRA adapters it has
// loaded (WorkerStats.lora_adapters); an adapter's name resolves to its
// base model with that adapter, its digest the one most of its holders
// report (a name reloaded with new weights moves over as workers do).
//
// Fixed. A router given --model reads the model from that file, admits
// workers of that id only, and takes the fingerprint from them.
//
// Thread-safety: every method is thread-safe; Admit fetches without the lock.
//
//   ModelCatalog catalog({});
//   WorkerPool pool({.admission = &catalog});
//   ASSIGN_OR_RETURN(ServedModel m, catalog.Resolve(request.model()));
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/router/frontend/router_model.h"
#include "services/router/server/model_admission.h"

namespace kvfleet::router {

struct ModelCatalogOptions {
  // --model: the one model this router serves, read from that file.
  std::shared_ptr<const RouterModel> fixed;
  // A whole DescribeModel call (a card of a few MB).
  std::chrono::milliseconds describe_timeout{10000};
};

class ModelCatalog final : public ModelAdmission, public WorkerObserver {
 public:
  explicit ModelCatalog(ModelCatalogOptions options);

  absl::Status Admit(const std::string& worker_id, const v1::WorkerInfo& info,
                     v1::Worker::StubInterface& stub) override;
  void Release(const std::string& worker_id) override;
  void Observe(const std::string& worker_id, const v1::WorkerInfo& info, const v1::WorkerStats& stats,
               v1::Worker::StubInterface& stub) override;

  // The model a request names, by id or served name; an empty name is the
  // router's only model. NOT_FOUND naming the models there are (or saying
  // none has been learnt yet); INVALID_ARGUMENT for an empty name when there
  // are several.
  // A name no model answers to but a LoRA adapter of one does resolves to
  // that model under the adapter (INVALID_ARGUMENT when adapters of two
  // models have it).
  absl::StatusOr<ServedModel> Resolve(std::string_view name) const;
  // `base` under its adapter `lora` (GenerationOptions.lora_adapter);
  // NOT_FOUND naming the adapters it has.
  absl::StatusOr<ServedModel> ResolveAdapter(const ServedModel& base, std::string_view lora) const;

  // A LoRA adapter of a model as its workers report it.
  struct ServedAdapter {
    std::string name;
    std::string digest;  // the one most holders report
    int32_t rank = 0;
    std::vector<std::string> holders;  // admitted workers that have it loaded (any digest)
  };
  // A model's adapters, by name.
  std::vector<ServedAdapter> Adapters(const std::string& model_id) const;
  // Every model known, by id; those whose workers all left included (a
  // request for one gets UNAVAILABLE from the pool, not NOT_FOUND).
  std::vector<ServedModel> Models() const;
  // A router given --model: that model is listed whether or not a worker serves it.
  bool fixed() const { return options_.fixed != nullptr; }

 private:
  struct Entry {
    ServedModel served;
    std::string card_digest;                   // of the card served: the workers' model_card_digest
    absl::flat_hash_set<std::string> holders;  // admitted workers with these weights and this card
  };
  // A worker's model as the catalog keys it: id, weights and card (the
  // card's digest is "" for a router given --model, whose card is the file).
  using ModelKey = std::tuple<std::string, std::string, std::string>;
  ModelKey KeyOf(const v1::WorkerInfo& info) const;

  // The router model for a worker's weights: the fixed one, one made
  // before, or one made from the card the worker describes.
  absl::StatusOr<std::shared_ptr<const RouterModel>> ModelFor(const v1::WorkerInfo& info,
                                                              v1::Worker::StubInterface& stub);
  absl::StatusOr<model::ModelCard> FetchCard(const v1::WorkerInfo& info, v1::Worker::StubInterface& stub) const;
  // Why `worker_id` may not serve `info`'s model as `model` now; OK if it may.
  absl::Status Conflict(const std::string& worker_id, const v1::WorkerInfo& info, const RouterModel& model) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ModelCatalogOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> models_ ABSL_GUARDED_BY(mu_);  // by model id
  // Router models by key, kept after their workers leave, so a model that
  // comes back, or a refused worker asked again, fetches nothing.
  absl::flat_hash_map<ModelKey, std::shared_ptr<const RouterModel>> made_ ABSL_GUARDED_BY(mu_);
  // Each admitted worker's loaded adapters, from its last probe.
  absl::flat_hash_map<std::string, std::vector<v1::LoraAdapterInfo>> worker_adapters_ ABSL_GUARDED_BY(mu_);
  std::vector<ServedAdapter> AdaptersLocked(const std::string& model_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace kvfleet::router
