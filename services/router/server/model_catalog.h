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
// One id, one set of weights. Block hashes chain from the model id and
// the fingerprint (common/block_hash.h), and the router hashes a request
// once for every worker it may go to, so a worker that reports a model id
// already served with other weights is refused, naming both workers,
// until every worker holding the old weights has left. A served name
// (--served-model-name) that another model already answers to is refused
// the same way.
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
  std::chrono::milliseconds describe_timeout{30000};
};

class ModelCatalog final : public ModelAdmission {
 public:
  explicit ModelCatalog(ModelCatalogOptions options);

  absl::Status Admit(const std::string& worker_id, const v1::WorkerInfo& info,
                     v1::Worker::StubInterface& stub) override;
  void Release(const std::string& worker_id) override;

  // The model a request names, by id or served name; an empty name is the
  // router's only model. NOT_FOUND naming the models there are (or saying
  // none has been learnt yet); INVALID_ARGUMENT for an empty name when there
  // are several.
  absl::StatusOr<ServedModel> Resolve(std::string_view name) const;
  // Every model known, by id; those whose workers all left included (a
  // request for one gets UNAVAILABLE from the pool, not NOT_FOUND).
  std::vector<ServedModel> Models() const;
  // A router given --model: that model is listed whether or not a worker serves it.
  bool fixed() const { return options_.fixed != nullptr; }

 private:
  struct Entry {
    ServedModel served;
    absl::flat_hash_set<std::string> holders;  // admitted workers with these weights
  };

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
  // Router models by model id and fingerprint, kept after their workers
  // leave, so a model that comes back is not fetched again.
  absl::flat_hash_map<std::pair<std::string, std::string>, std::shared_ptr<const RouterModel>> made_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace kvfleet::router
