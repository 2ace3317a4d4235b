// Checks a JSON Schema before it is compiled, so that a mistake or a
// feature constrained decoding does not support is reported at its JSON
// path ("$.properties.age.minimum must be a number") rather than as the
// grammar compiler's message without a place.
//
//   RETURN_IF_ERROR(CheckJsonSchema(schema));
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace kvfleet::worker {

// INVALID_ARGUMENT naming the JSON path of the first problem.
absl::Status CheckJsonSchema(const nlohmann::ordered_json& schema);

}  // namespace kvfleet::worker
