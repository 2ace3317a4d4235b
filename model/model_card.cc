#include "model/model_card.h"

#include <utility>

namespace kvfleet::model {

ModelCard CardOf(const Model& model, std::string id, std::string fingerprint) {
  return ModelCard{.id = std::move(id),
                   .fingerprint = std::move(fingerprint),
                   .context_length = static_cast<int32_t>(model.config().context_length),
                   .vocabulary = model.vocabulary(),
                   .generation_defaults = model.source().generation_defaults()};
}

}  // namespace kvfleet::model
