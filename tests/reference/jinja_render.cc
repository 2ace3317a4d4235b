// The C++ side of jinja_reference.py: renders templates with kvfleet's
// Jinja engine. Reads JSON Lines on stdin, one request per line:
//   {"name": "...", "template": "...", "context": {...}, "now": 1700000000}
// and writes one line per request:
//   {"ok": true, "text": "..."}  or  {"ok": false, "error": "..."}
// Templates are parsed once per distinct source.
#include <iostream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "model/jinja/json_value.h"
#include "model/jinja/template.h"

int main() {
  using kvfleet::jinja::Template;
  std::map<std::string, absl::StatusOr<Template>> parsed;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::ordered_json request = nlohmann::ordered_json::parse(line);
    nlohmann::ordered_json reply;
    const std::string source = request.at("template").get<std::string>();
    auto it = parsed.find(source);
    if (it == parsed.end()) {
      it = parsed.emplace(source, Template::Parse(source, request.value("name", std::string("template")))).first;
    }
    absl::StatusOr<kvfleet::jinja::Text> text = absl::InvalidArgumentError("unparsed");
    if (it->second.ok()) {
      kvfleet::jinja::Value context = kvfleet::jinja::FromJson(request.at("context"));
      kvfleet::jinja::RenderOptions options;
      options.now = request.value("now", static_cast<int64_t>(0));
      text = it->second->Render(context.dict(), options);
    } else {
      text = it->second.status();
    }
    if (text.ok()) {
      reply["ok"] = true;
      reply["text"] = text->str();
    } else {
      reply["ok"] = false;
      reply["error"] = std::string(text.status().message());
    }
    std::cout << reply.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  }
  return 0;
}
