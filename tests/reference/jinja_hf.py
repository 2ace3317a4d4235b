"""jinja2 configured the way Hugging Face transformers renders chat templates.

This mirrors transformers' `_compile_jinja_template` (utils/chat_template_utils.py,
the version with AssistantTracker, tojson and strftime_now):

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[AssistantTracker, jinja2.ext.loopcontrols])
  filters["tojson"]          = json.dumps(x, ensure_ascii=False, indent=indent,
                                          separators=separators, sort_keys=sort_keys)
  globals["raise_exception"] = raise jinja2.exceptions.TemplateError(message)
  globals["strftime_now"]    = datetime.now().strftime(format)

with two deliberate differences: strftime_now formats a fixed `now` (unix seconds,
so both sides agree) as a naive UTC datetime, which is what datetime.now() gives
on a machine whose local time is UTC (%Z and %z are then empty); and the
AssistantTracker keeps only its rendering behaviour: `{% generation %}...
{% endgeneration %}` is a call block whose body is rendered through caller()
and returned as is (the index tracking, inactive in apply_chat_template's plain
rendering, is left out).

Run as a script it is the stand-in for the C++ `jinja_render` driver: JSON
Lines in ({"name", "template", "context", "now"}), one JSON line out per input
({"ok": true, "text": ...} or {"ok": false, "error": ...}).
"""

import functools
import json
import sys
from datetime import datetime, timezone

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: a pass-through call block, as in transformers."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers overrides jinja's tojson, which would HTML-escape <, >, & and '.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_environment(now=0):
    """A fresh environment; strftime_now formats the fixed time `now` (unix seconds, UTC)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    fixed = datetime.fromtimestamp(now, timezone.utc).replace(tzinfo=None)
    env.globals["strftime_now"] = lambda format: fixed.strftime(format)
    return env


_ENVIRONMENTS = {}


@functools.lru_cache(maxsize=None)
def compile_template(template, now=0):
    """The compiled template (cached, as transformers caches it); raises what jinja2 raises."""
    env = _ENVIRONMENTS.get(now)
    if env is None:
        env = _ENVIRONMENTS[now] = make_environment(now)
    return env.from_string(template)


def render(template, context, now=0):
    """(True, text) or (False, "ExceptionType: message") for any exception from compiling or rendering."""
    try:
        return True, compile_template(template, now).render(**context)
    except Exception as e:  # noqa: BLE001 -- any exception means "the reference raised"
        return False, f"{type(e).__name__}: {e}"


def serve(stdin, stdout):
    """The jinja_render protocol over JSON Lines, rendered by jinja2 (the --self-check stand-in)."""
    for line in stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        ok, text = render(request["template"], request["context"], request.get("now", 0))
        reply = {"ok": True, "text": text} if ok else {"ok": False, "error": text}
        stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
    stdout.flush()


if __name__ == "__main__":
    sys.stdin.reconfigure(encoding="utf-8")
    sys.stdout.reconfigure(encoding="utf-8")
    serve(sys.stdin, sys.stdout)
