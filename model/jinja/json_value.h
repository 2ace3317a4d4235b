// Template inputs from JSON (an API request's messages and tools), as
// Python's json.loads would hand them to jinja2: objects keep their key
// order, 1.0 stays a float, and every string is marked as input (text.h).
#pragma once

#include <nlohmann/json.hpp>

#include "model/jinja/value.h"

namespace kvfleet::jinja {

Value FromJson(const nlohmann::ordered_json& json);

}  // namespace kvfleet::jinja
