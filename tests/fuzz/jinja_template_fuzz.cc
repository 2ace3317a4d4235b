// The Jinja engine on arbitrary template sources: parsing either succeeds
// or fails with a status naming the template, and rendering a parsed
// template over a fixed conversation either succeeds or fails with a
// status; neither crashes, hangs or runs out of memory (loops, repetition
// and output are bounded). The dictionary is Jinja's syntax.
#include <string>

#include "model/jinja/json_value.h"
#include "model/jinja/template.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvfleet;
  const std::string source(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(source, "fuzz");
  if (!t.ok()) {
    fuzz::Check(t.status().message().find("template 'fuzz'") != std::string::npos, "error does not name the template");
    return 0;
  }
  static const jinja::Value kContext = jinja::FromJson(nlohmann::ordered_json::parse(R"({
      "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi <|im_end|>"},
                   {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "f", "arguments": {"x": 1.5, "y": [true, null]}}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "42"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})"));
  absl::StatusOr<jinja::Text> out = t->Render(kContext.dict(), {.now = 1700000000, .max_steps = 200000});
  if (out.ok()) fuzz::Check(out->size() <= (64u << 20) + 4096, "output beyond the bound");
  return 0;
}
