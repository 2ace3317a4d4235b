// A Jinja template as Hugging Face's apply_chat_template renders it: jinja2
// in an immutable sandbox with trim_blocks and lstrip_blocks, the
// loopcontrols extension ({% break %}, {% continue %}), {% generation %},
// Hugging Face's tojson, raise_exception and strftime_now, and jinja2's
// default Undefined. The output is byte-for-byte what jinja2 renders
// (tests/reference/jinja_reference.py proves it on real templates), with
// each byte's origin (text.h) so the caller can tell the template's own
// control-token texts from the same texts inside a user's message.
//
// Errors name the template and the line: a syntax error or an unknown
// filter or test at Parse (jinja2 raises those when it compiles), and at
// Render whatever jinja2 would raise (an undefined value used in
// arithmetic, raise_exception('...'), a type error, ...).
//
// Thread-safety: immutable after Parse; Render may run concurrently.
//
//   ASSIGN_OR_RETURN(Template t, Template::Parse(source, "chat_template"));
//   ASSIGN_OR_RETURN(Text out, t.Render(variables));
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/jinja/ast.h"
#include "model/jinja/text.h"
#include "model/jinja/value.h"

namespace kvfleet::jinja {

struct RenderOptions {
  // The time strftime_now formats; 0: now.
  std::time_t now = 0;
  // Statements and loop iterations one render may run: a real chat
  // template over a long conversation runs thousands; a template that loops
  // without end fails instead of holding a server thread.
  int64_t max_steps = 10'000'000;
};

class Template {
 public:
  static absl::StatusOr<Template> Parse(std::string_view source, std::string name);

  // `variables`: the template's inputs (messages, tools, bos_token, ...).
  absl::StatusOr<Text> Render(const DictData& variables, const RenderOptions& options = {}) const;

  const std::string& name() const { return name_; }

 private:
  Template() = default;
  std::string name_;
  std::shared_ptr<const Body> body_;
};

}  // namespace kvfleet::jinja
