#!/usr/bin/env python3
"""Chat template reference: kvfleet's ChatTemplate vs jinja2 rendering the real template.

jinja2 renders each template string the way Hugging Face's
apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks); kvfleet
renders the same message lists through tokenize_dump. The rendered prompts
must be byte-identical. Templates: SmolLM2's (read from the GGUF with the
`gguf` package), Meta Llama 3 Instruct's, Qwen2's ChatML (default system
prompt written with \\n escapes), a bare ChatML one, a Gemma-style one and
one with Llama 3.1's date preamble. This checks ChatTemplate's wiring (the
vocabulary's BOS, the variables it passes); jinja_reference.py proves the
engine itself on real templates.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_gguf import read_tokenizer_metadata  # noqa: E402
from tokenizer_strings import CODE, EMOJI, SPACES, WORDS  # noqa: E402

# Meta-Llama-3-8B-Instruct's tokenizer_config.json chat_template.
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
# Qwen2-Instruct's, with the escapes as they are in its tokenizer_config.json.
QWEN2 = (r"{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
         r"{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
         r"{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
         r"{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
CHATML = (r"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          r"'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
          r"{% endif %}")
# Two more families.
GEMMA = ("{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\n' + "
         "message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
LLAMA31_PREAMBLE = ("{{- bos_token }}{{- '<|start_header_id|>system<|end_header_id|>\n\n' }}"
                    "{{- 'Cutting Knowledge Date: December 2023\n' }}{% for message in messages %}"
                    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] "
                    "+ '<|eot_id|>' }}{% endfor %}")


_COMPILED = {}


def render(source, messages, add_generation_prompt, bos_token):
    if source not in _COMPILED:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
        _COMPILED[source] = env.from_string(source)
    return _COMPILED[source].render(messages=messages, add_generation_prompt=add_generation_prompt,
                                    bos_token=bos_token, eos_token="")


def random_content(rng):
    parts = []
    for _ in range(rng.randint(0, 5)):
        kind = rng.random()
        if kind < 0.4:
            parts.append(rng.choice(WORDS[rng.choice(list(WORDS))]))
        elif kind < 0.6:
            parts.append(rng.choice(SPACES))
        elif kind < 0.75:
            parts.append(rng.choice(EMOJI))
        elif kind < 0.85:
            parts.append(rng.choice(CODE))
        else:
            parts.append(rng.choice(["What is 2+2?", "Hi!", "{{ not a template }}", "{% raw %}", "'quoted'",
                                     "<|im_end|>", "\\n", "\u00a0padded\u3000"]))
    return "".join(parts)


def message_lists(rng, count):
    lists = [
        [{"role": "user", "content": "Hello"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        [{"role": "user", "content": "  spaced \n"}, {"role": "assistant", "content": "\tok\t"},
         {"role": "user", "content": ""}],
        [{"role": "system", "content": ""}, {"role": "tool", "content": "42"}],
    ]
    while len(lists) < count:
        n = rng.randint(1, 6)
        roles = [rng.choice(["user", "assistant", "system", "tool"]) for _ in range(n)]
        if rng.random() < 0.5:
            roles[0] = "system"
        lists.append([{"role": r, "content": random_content(rng)} for r in roles])
    return lists


def run_dump(dump, cases, template_args, workdir):
    inp = os.path.join(workdir, "chat.in")
    out = os.path.join(workdir, "chat.out")
    with open(inp, "w") as f:
        for messages, gen in cases:
            fields = [f"{m['role']}:{m['content'].encode('utf-8').hex()}" for m in messages]
            f.write(" ".join(["1" if gen else "0"] + fields) + "\n")
    proc = subprocess.run([dump, "chat", *template_args, "--input", inp, "--output", out],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"tokenize_dump chat failed ({proc.returncode}): {proc.stderr}")
    with open(out) as f:
        lines = [line.rstrip("\n") for line in f]
    if len(lines) != len(cases):
        raise SystemExit(f"tokenize_dump wrote {len(lines)} lines for {len(cases)} chats")
    return lines


def check_template(name, dump, source, bos, template_args, cases, workdir):
    lines = run_dump(dump, cases, template_args, workdir)
    same = 0
    for i, ((messages, gen), line) in enumerate(zip(cases, lines)):
        want = render(source, messages, gen, bos)
        got = bytes.fromhex(line).decode("utf-8") if not line.startswith("ERROR") else line
        if got == want:
            same += 1
        elif i - same < 5:
            print(f"[{name} #{i}] messages={messages!r} gen={gen}\n    kvfleet: {got!r}\n    jinja2:  {want!r}")
    print(f"  {name}: {same}/{len(cases)} identical")
    return same == len(cases)


def expect_errors(name, dump, template_args, cases, workdir, code):
    lines = run_dump(dump, cases, template_args, workdir)
    ok = all(line.startswith(f"ERROR {code}") for line in lines)
    print(f"  {name}: {'refused' if ok else 'NOT refused'} ({lines[0][:150]})")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--model", required=True, help="SmolLM2 GGUF (its tokenizer.chat_template)")
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--count", type=int, default=150, help="message lists per template")
    args = ap.parse_args()
    if not os.path.exists(args.model):
        print(f"SKIP: model {args.model} not found (scripts/fetch_model.sh fetches it)")
        return 77  # ctest's SKIP_RETURN_CODE
    rng = random.Random(args.seed)
    cases = [(m, gen) for m in message_lists(rng, args.count) for gen in (False, True)]
    meta = read_tokenizer_metadata(args.model)
    smollm_source = meta["chat_template"]
    bos_text = meta["tokens"][meta["bos_token_id"]]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        def template_file(name, source):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
            return path

        ok &= check_template("SmolLM2 (from the GGUF)", args.dump, smollm_source, bos_text,
                             ["--model", args.model], cases, tmp)
        ok &= check_template("Llama 3", args.dump, LLAMA3, "<|begin_of_text|>",
                             ["--template", template_file("llama3", LLAMA3), "--bos", "<|begin_of_text|>"],
                             cases, tmp)
        ok &= check_template("Qwen2 ChatML", args.dump, QWEN2, "",
                             ["--template", template_file("qwen2", QWEN2)], cases, tmp)
        ok &= check_template("bare ChatML", args.dump, CHATML, "",
                             ["--template", template_file("chatml", CHATML)], cases, tmp)
        ok &= check_template("Gemma style", args.dump, GEMMA, "<bos>",
                             ["--template", template_file("gemma", GEMMA), "--bos", "<bos>"], cases, tmp)
        ok &= check_template("Llama 3.1 preamble", args.dump, LLAMA31_PREAMBLE, "<|begin_of_text|>",
                             ["--template", template_file("llama31", LLAMA31_PREAMBLE), "--bos", "<|begin_of_text|>"],
                             cases, tmp)
        ok &= expect_errors("empty message list", args.dump, ["--model", args.model], [([], True)], tmp,
                            "INVALID_ARGUMENT")
    print(f"chat template reference: {'all identical' if ok else 'MISMATCH'} "
          f"({len(cases)} message lists x 6 templates)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
