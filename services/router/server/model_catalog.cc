#include "services/router/server/model_catalog.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "services/transport/wire/model_card_convert.h"

namespace kvfleet::router {
namespace {

// Enough of a fingerprint to tell two apart in a message.
std::string Short(const std::string& fingerprint) {
  return fingerprint.empty() ? std::string("(none)") : fingerprint.substr(0, 12);
}

}  // namespace

ModelCatalog::ModelCatalog(ModelCatalogOptions options) : options_(std::move(options)) {
  // Known from the start, so a request for it before any worker gets
  // UNAVAILABLE (no worker), not NOT_FOUND.
  if (options_.fixed != nullptr) models_[options_.fixed->id()].served.model = options_.fixed;
}

absl::Status ModelCatalog::Admit(const std::string& worker_id, const v1::WorkerInfo& info,
                                 v1::Worker::StubInterface& stub) {
  if (options_.fixed != nullptr && info.model_id() != options_.fixed->id()) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker_id, " serves model ", info.model_id(),
                                                      ", and this router serves only ", options_.fixed->id(),
                                                      " (--model)"));
  }
  {
    // A known model whose weights conflict is refused before anything is fetched.
    absl::MutexLock lock(&mu_);
    auto made = made_.find(KeyOf(info));
    if (made != made_.end()) RETURN_IF_ERROR(Conflict(worker_id, info, *made->second));
  }
  // Fetched without the lock: requests keep resolving meanwhile.
  absl::StatusOr<std::shared_ptr<const RouterModel>> model = ModelFor(info, stub);
  if (!model.ok()) {
    return absl::Status(model.status().code(), absl::StrCat("model ", info.model_id(), " of worker ", worker_id, ": ",
                                                            model.status().message()));
  }
  absl::MutexLock lock(&mu_);
  // Kept even when refused below, so a refused worker's next probe fetches nothing.
  made_.try_emplace(KeyOf(info), *model);
  RETURN_IF_ERROR(Conflict(worker_id, info, **model));
  Entry& e = models_[info.model_id()];
  if (e.holders.empty() && (e.served.model != *model || e.served.fingerprint != info.model_fingerprint())) {
    e.card_digest = std::get<2>(KeyOf(info));
    if (e.served.model != nullptr && e.served.fingerprint != info.model_fingerprint() &&
        !e.served.fingerprint.empty()) {
      KVFLEET_LOG_WARN("model {} is now served with weights {}, no longer {}: its cached prefixes start over",
                       info.model_id(), Short(info.model_fingerprint()), Short(e.served.fingerprint));
    } else {
      KVFLEET_LOG_INFO("serving model {} (weights {}, {} tokens of context), first from worker {}", info.model_id(),
                       Short(info.model_fingerprint()), (*model)->context_length(), worker_id);
    }
    e.served = ServedModel{.model = *model, .fingerprint = info.model_fingerprint()};
  }
  e.holders.insert(worker_id);
  return absl::OkStatus();
}

void ModelCatalog::Release(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, e] : models_) e.holders.erase(worker_id);
  worker_adapters_.erase(worker_id);
}

void ModelCatalog::Observe(const std::string& worker_id, const v1::WorkerInfo&, const v1::WorkerStats& stats,
                           v1::Worker::StubInterface&) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::LoraAdapterInfo>& adapters = worker_adapters_[worker_id];
  adapters.assign(stats.lora_adapters().begin(), stats.lora_adapters().end());
}

std::vector<ModelCatalog::ServedAdapter> ModelCatalog::AdaptersLocked(const std::string& model_id) const {
  auto model = models_.find(model_id);
  if (model == models_.end()) return {};
  // Per name: each digest's holders, in worker order (a stable choice).
  std::map<std::string, std::map<std::string, std::vector<std::string>>> by_name;
  std::map<std::string, int32_t> ranks;
  std::vector<std::string> holders(model->second.holders.begin(), model->second.holders.end());
  std::sort(holders.begin(), holders.end());
  for (const std::string& worker : holders) {
    auto it = worker_adapters_.find(worker);
    if (it == worker_adapters_.end()) continue;
    for (const v1::LoraAdapterInfo& a : it->second) {
      by_name[a.name()][a.digest()].push_back(worker);
      ranks[a.name()] = a.rank();
    }
  }
  std::vector<ServedAdapter> out;
  for (const auto& [name, digests] : by_name) {
    ServedAdapter a{.name = name, .rank = ranks[name]};
    size_t most = 0;
    for (const auto& [digest, workers] : digests) {
      if (workers.size() > most) {
        most = workers.size();
        a.digest = digest;
      }
      a.holders.insert(a.holders.end(), workers.begin(), workers.end());
    }
    std::sort(a.holders.begin(), a.holders.end());
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<ModelCatalog::ServedAdapter> ModelCatalog::Adapters(const std::string& model_id) const {
  absl::MutexLock lock(&mu_);
  return AdaptersLocked(model_id);
}

absl::StatusOr<ServedModel> ModelCatalog::ResolveAdapter(const ServedModel& base, std::string_view lora) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const ServedAdapter& a : AdaptersLocked(base.model->id())) {
    if (a.name == lora) {
      ServedModel served = base;
      served.lora = a.name;
      served.lora_digest = a.digest;
      return served;
    }
    names.push_back(a.name);
  }
  return absl::NotFoundError(absl::StrCat(
      "model '", base.model->served_name(), "' has no LoRA adapter '", std::string(lora), "' loaded on any worker",
      names.empty() ? std::string(" (it has none)") : absl::StrCat(" (it has ", absl::StrJoin(names, ", "), ")"),
      "; load it with POST /v1/load_lora_adapter"));
}

ModelCatalog::ModelKey ModelCatalog::KeyOf(const v1::WorkerInfo& info) const {
  return {info.model_id(), info.model_fingerprint(), fixed() ? std::string() : info.model_card_digest()};
}

absl::Status ModelCatalog::Conflict(const std::string& worker_id, const v1::WorkerInfo& info,
                                    const RouterModel& model) const {
  auto same_id = models_.find(info.model_id());
  if (same_id != models_.end() && same_id->second.served.fingerprint == info.model_fingerprint() &&
      same_id->second.card_digest != std::get<2>(KeyOf(info))) {
    std::vector<std::string> holders(same_id->second.holders.begin(), same_id->second.holders.end());
    std::erase(holders, worker_id);
    if (!holders.empty()) {
      std::sort(holders.begin(), holders.end());
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", worker_id, " describes model ", info.model_id(), " otherwise than worker ", holders.front(),
          " (the same weights, another chat template or served name): it gets no requests until the workers "
          "describing it the old way have left; give every worker of a model the same --chat-template and "
          "--served-model-name"));
    }
  }
  if (same_id != models_.end() && same_id->second.served.fingerprint != info.model_fingerprint()) {
    const Entry& e = same_id->second;
    std::vector<std::string> holders(e.holders.begin(), e.holders.end());
    std::erase(holders, worker_id);
    if (!holders.empty()) {
      std::sort(holders.begin(), holders.end());
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", worker_id, " serves model ", info.model_id(), " with weights ",
                       Short(info.model_fingerprint()), ", but worker ", holders.front(), " serves it with weights ",
                       Short(e.served.fingerprint), ": one model id names one set of weights, so ", worker_id,
                       " gets no requests until those workers have left; give it its own --model-id"));
    }
  }
  for (const auto& [id, other] : models_) {
    // A model whose workers all left gives its name up (the fixed one never has workers to lose).
    if (id == model.id() || other.served.model == nullptr || other.holders.empty()) continue;
    const RouterModel& o = *other.served.model;
    if (o.served_name() == model.served_name() || id == model.served_name() || o.served_name() == model.id()) {
      return absl::FailedPreconditionError(absl::StrCat("worker ", worker_id, " serves model ", model.id(), " as '",
                                                        model.served_name(), "', a name model ", id,
                                                        " already answers to; give one of them another "
                                                        "--served-model-name"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const RouterModel>> ModelCatalog::ModelFor(const v1::WorkerInfo& info,
                                                                          v1::Worker::StubInterface& stub) {
  if (options_.fixed != nullptr) return options_.fixed;
  {
    absl::MutexLock lock(&mu_);
    auto made = made_.find(KeyOf(info));
    if (made != made_.end()) return made->second;
  }
  ASSIGN_OR_RETURN(model::ModelCard card, FetchCard(info, stub));
  ASSIGN_OR_RETURN(std::unique_ptr<RouterModel> model, RouterModel::Create(std::move(card)));
  return std::shared_ptr<const RouterModel>(std::move(model));
}

absl::StatusOr<model::ModelCard> ModelCatalog::FetchCard(const v1::WorkerInfo& info,
                                                         v1::Worker::StubInterface& stub) const {
  const auto started = std::chrono::steady_clock::now();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.describe_timeout);
  std::unique_ptr<grpc::ClientReaderInterface<v1::ModelDescriptionChunk>> reader =
      stub.DescribeModel(&context, v1::DescribeModelRequest());
  transport::ModelCardReader cards;
  v1::ModelDescriptionChunk chunk;
  absl::Status read = absl::OkStatus();
  while (read.ok() && reader->Read(&chunk)) read = cards.Add(chunk);
  if (!read.ok()) context.TryCancel();
  const grpc::Status finished = reader->Finish();
  if (!read.ok()) return read;
  if (!finished.ok()) return absl::UnavailableError(absl::StrCat("DescribeModel failed: ", finished.error_message()));
  ASSIGN_OR_RETURN(model::ModelCard card, cards.Finish());
  if (card.id != info.model_id() || card.fingerprint != info.model_fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat("DescribeModel described model ", card.id, " (weights ",
                                                      Short(card.fingerprint), "), but GetInfo said ", info.model_id(),
                                                      " (weights ", Short(info.model_fingerprint()), ")"));
  }
  KVFLEET_LOG_INFO(
      "learnt model {} ({} tokens in its vocabulary) in {} ms", card.id, card.vocabulary.size(),
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
  return card;
}

absl::StatusOr<ServedModel> ModelCatalog::Resolve(std::string_view name) const {
  absl::MutexLock lock(&mu_);
  // A name resolves to a model with workers before one whose workers all
  // left (which still resolves, so its requests get UNAVAILABLE); only the
  // models with workers, or the fixed one, count as "the only model".
  std::vector<std::string> names;
  const ServedModel* only = nullptr;
  const ServedModel* named_without_workers = nullptr;
  for (const auto& [id, e] : models_) {
    if (e.served.model == nullptr) continue;
    const bool serving = !e.holders.empty() || fixed();
    if (!name.empty() && (e.served.model->served_name() == name || id == name)) {
      if (serving) return e.served;
      named_without_workers = &e.served;
    }
    if (!serving) continue;
    names.push_back(e.served.model->served_name());
    only = &e.served;
  }
  if (named_without_workers != nullptr) return *named_without_workers;
  std::sort(names.begin(), names.end());
  // Not a model: a LoRA adapter of one?
  if (!name.empty()) {
    std::vector<ServedModel> under;
    for (const auto& [id, e] : models_) {
      if (e.served.model == nullptr || e.holders.empty()) continue;
      for (const ServedAdapter& a : AdaptersLocked(id)) {
        if (a.name != name) continue;
        ServedModel served = e.served;
        served.lora = a.name;
        served.lora_digest = a.digest;
        under.push_back(std::move(served));
      }
    }
    if (under.size() == 1) return under.front();
    if (under.size() > 1) {
      std::vector<std::string> bases;
      for (const ServedModel& s : under) bases.push_back(s.model->served_name());
      std::sort(bases.begin(), bases.end());
      return absl::InvalidArgumentError(absl::StrCat("LoRA adapter '", std::string(name), "' is loaded for ",
                                                     absl::StrJoin(bases, " and "),
                                                     "; name the model and the adapter apart (lora_adapter)"));
    }
  }
  if (names.empty()) {
    return absl::NotFoundError(
        absl::StrCat(name.empty() ? std::string("no model") : absl::StrCat("model '", std::string(name), "'"),
                     ": this router serves no model now (no worker of any is admitted); "
                     "start a worker, or check the cachemanager (kvfleet workers)"));
  }
  if (name.empty()) {
    if (names.size() == 1) return *only;
    return absl::InvalidArgumentError(absl::StrCat("no model named: this router serves ", names.size(),
                                                   " models; name one of ", absl::StrJoin(names, ", ")));
  }
  return absl::NotFoundError(absl::StrCat("model '", std::string(name), "' is not served here; this router serves ",
                                          absl::StrJoin(names, ", ")));
}

std::vector<ServedModel> ModelCatalog::Models() const {
  absl::MutexLock lock(&mu_);
  std::vector<ServedModel> out;
  for (const auto& [id, e] : models_) {
    if (e.served.model != nullptr) out.push_back(e.served);
  }
  std::sort(out.begin(), out.end(),
            [](const ServedModel& a, const ServedModel& b) { return a.model->id() < b.model->id(); });
  return out;
}

}  // namespace kvfleet::router
