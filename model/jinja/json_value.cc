#include "model/jinja/json_value.h"

namespace kvfleet::jinja {

Value FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::Int(static_cast<int64_t>(json.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::String(Text::Input(json.get<std::string>()));
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJson(item));
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictData d;
      d.entries.reserve(json.size());
      for (const auto& [k, v] : json.items()) d.entries.emplace_back(Value::String(Text::Input(k)), FromJson(v));
      return Value::Dict(std::move(d));
    }
    default:
      return Value::None();
  }
}

}  // namespace kvfleet::jinja
