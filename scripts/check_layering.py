#!/usr/bin/env python3
"""The layering check: every target includes only headers of its own folders
and of the targets in its link closure; transport stays out of
transport-free code.

The build's only include directory is the repository root, so a header-only
include could go around the link lists that say which library may use which
(docs/design.md, "Layers and the dependency rule"). This check holds the code
to them. It reads the manifest CMake writes at configure time
(cmake/LayeringManifest.cmake: each target's type, sources, link lists and
claimed files) and, for every target:

  - the files it is responsible for: its sources, the files it claims
    (kvfleet_owns), and the headers of its folders it owns (below);
  - what those may include from the repository: a file owned by the target
    itself or by a target in its link closure, or a file of one of its own
    folders that no one target owns
    (its LINK_LIBRARIES, then each of those targets' INTERFACE_LINK_LIBRARIES,
    transitively; a $<LINK_ONLY:...> entry links but lends no headers).
An include line ending in "// layering: <why>" is exempt (the CUDA
compatibility header includes the emulation only in the emulated build).
A file belongs to the targets that list or claim it; failing that, to the
targets compiling the source of the same name beside it (foo.h of foo.cc);
failing that, to every target with a source in its folder. An include of a
file no target owns fails too.

Inside the engine, whose folders are libraries stacked in one order, three
more rules, independent of the link lists (so a link added the wrong way
cannot make a wrong include pass):

  - ENGINE_LAYERS: a file in an engine folder includes only engine headers
    of its own folder and of the folders below it;
  - one library per engine folder (the executor's backends excepted): the
    folder's sources are compiled by one target, which compiles no other
    folder's;
  - the project's link graph has no cycle.

Then the transport rules: no
gRPC or generated proto header in common/, model/, kernels/, engine/ or the
services' index, placement and frontend folders; client channels only from
services/transport/grpc/grpc_channel.cc, servers only from grpc_server.cc.

  check_layering.py --manifest build/layering_manifest.txt [--self-test]
Exit 0 when clean; 1 with one line per violation. --self-test also plants
each of SEEDS (a wrong include, added in memory) and fails unless the check
then names it: a rule that stopped biting fails CI.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys

# An include followed by "// layering: <why>" is exempt (a header included
# only under a build's own #if, such as the CUDA emulation's).
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"(?!\s*//\s*layering:)', re.M)
HEADER_EXT = (".h", ".cuh")

# The engine's folders, each a library, and the engine folders each may
# include (a file's folder is its longest prefix here; engine/ itself, the
# loop, may include them all).
ENGINE_LAYERS = {
    "engine/sampler": [],
    "engine/executor": [],
    "engine/request": ["engine/sampler"],
    "engine/kv": ["engine/request", "engine/sampler"],
    "engine/kv/tiers": ["engine/kv", "engine/request", "engine/sampler"],
    "engine/kv/transfer": ["engine/kv/tiers", "engine/kv", "engine/request", "engine/sampler"],
    "engine/scheduler": ["engine/kv", "engine/request", "engine/sampler", "engine/executor"],
    "engine/spec": ["engine/kv", "engine/request", "engine/sampler", "engine/executor"],
    "engine/calibration": ["engine/executor"],
}
# Folders whose several targets are one backend each.
MULTI_TARGET_FOLDERS = {"engine/executor"}

# Wrong includes the self-test plants, one at a time: each must be named.
SEEDS = [
    ("engine/kv/tiers/kv_tier_manager.h", "engine/executor/model_executor.h"),
    ("engine/request/request.h", "engine/spec/proposer.h"),
    ("engine/kv/block_pool.h", "engine/scheduler/scheduler.h"),
    ("engine/sampler/sampler.h", "engine/request/request.h"),
    ("engine/executor/model_executor.h", "engine/kv/block_pool.h"),
    ("engine/scheduler/scheduler.cc", "engine/engine.h"),
]
SOURCE_EXT = (".cc", ".cu", ".cpp", ".c", ".h", ".cuh")


def read_manifest(path):
    targets = collections.defaultdict(dict)
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t", 2)
            if len(parts) != 3:
                continue
            name, prop, value = parts
            targets[name][prop] = [v for v in value.split(";") if v] if prop not in ("TYPE", "SOURCE_DIR") else value
    return targets


def link_names(entries, known, keep_link_only):
    """Project target names in a link list (generator expressions unwrapped)."""
    out = []
    for e in entries:
        link_only = "$<LINK_ONLY:" in e
        m = re.search(r"([A-Za-z0-9_:.+-]+)>*$", e)
        name = m.group(1) if m else e
        if name in known and (keep_link_only or not link_only):
            out.append(name)
    return out


def engine_folder(rel):
    """The ENGINE_LAYERS folder of a repository path, or "engine" or None."""
    best = None
    for f in ENGINE_LAYERS:
        if rel.startswith(f + "/") and (best is None or len(f) > len(best)):
            best = f
    if best is None and rel.startswith("engine/"):
        return "engine"
    return best


def check(manifest, root, planted=None):
    """Every violation, as lines. `planted` maps a repository path to an
    include line read as if it were in that file."""
    planted = planted or {}
    targets = read_manifest(manifest)
    known = set(targets)

    binary_dir = os.path.realpath(os.path.dirname(manifest))

    def under_root(p):
        in_root = p == root or p.startswith(root + os.sep)
        return in_root and not p.startswith(binary_dir + os.sep)

    def read(p):
        with open(p, errors="replace") as f:
            text = f.read()
        extra = planted.get(os.path.relpath(p, root))
        return text + f'\n#include "{extra}"\n' if extra else text
    # Each target's files in the repository, and its folders.
    files, folders = {}, {}
    for name, t in targets.items():
        base = t.get("SOURCE_DIR", root)
        own = set()
        for s in t.get("SOURCES", []) + t.get("INTERFACE_SOURCES", []) + t.get("KVFLEET_OWNS", []):
            if "$<" in s:
                continue
            p = os.path.realpath(os.path.join(base, s))
            if under_root(p) and os.path.isfile(p):
                own.add(p)
        files[name] = own
        folders[name] = {os.path.dirname(p) for p in own}

    # Who owns a file: the targets that list or claim it; else the targets
    # compiling a source of the same name beside it (foo.h of foo.cc); else
    # every target with a source in its folder.
    listed = collections.defaultdict(set)  # file -> targets
    folder_owners = collections.defaultdict(set)  # folder -> targets
    for name in targets:
        for p in files[name]:
            listed[p].add(name)
        for d in folders[name]:
            folder_owners[d].add(name)

    def owners_of(p):
        """(owners, specific): specific when they list, claim or pair with the file."""
        if listed.get(p):
            return listed[p], True
        stem = os.path.splitext(p)[0]
        paired = set()
        for ext in (".cc", ".cu", ".cpp", ".c"):
            paired |= listed.get(stem + ext, set())
        if paired:
            return paired, True
        return folder_owners.get(os.path.dirname(p), set()), False

    iface_cache = {}

    def interface_closure(name):
        if name not in iface_cache:
            iface_cache[name] = set()  # cycles end here
            out = set()
            for d in link_names(targets[name].get("INTERFACE_LINK_LIBRARIES", []), known, False):
                out.add(d)
                out |= interface_closure(d)
            iface_cache[name] = out
        return iface_cache[name]

    def closure(name):
        out = set()
        for d in link_names(targets[name].get("LINK_LIBRARIES", []), known, False):
            out.add(d)
            out |= interface_closure(d)
        for d in link_names(targets[name].get("INTERFACE_LINK_LIBRARIES", []), known, False):
            out.add(d)
            out |= interface_closure(d)
        return out

    problems = []
    for name in sorted(targets):
        allowed = closure(name) | {name}
        # The files this target answers for: its own, and the headers of its
        # folders that it owns (alone or with the folder's other targets).
        to_check = set(files[name])
        for d in folders[name]:
            for entry in os.listdir(d):
                p = os.path.join(d, entry)
                if entry.endswith(HEADER_EXT) and name in owners_of(p)[0]:
                    to_check.add(p)
        for src in sorted(to_check):
            if not src.endswith(SOURCE_EXT):
                continue
            text = read(src)
            for inc in INCLUDE.findall(text):
                p = os.path.realpath(os.path.join(root, inc))
                if not os.path.isfile(p):
                    p = os.path.realpath(os.path.join(os.path.dirname(src), inc))
                    if not os.path.isfile(p):
                        continue  # generated or external
                if not under_root(p):
                    continue
                own, specific = owners_of(p)
                if own & allowed or (not specific and os.path.dirname(p) in folders[name]):
                    continue
                rel_src, rel_inc = os.path.relpath(src, root), os.path.relpath(p, root)
                if not own:
                    problems.append(f"{rel_src} ({name}) includes {rel_inc}, which no target owns "
                                    "(list it in a target's sources or kvfleet_owns)")
                else:
                    problems.append(f"{rel_src} ({name}) includes {rel_inc} of {', '.join(sorted(own))}, "
                                    f"outside {name}'s link closure")

    problems += engine_problems(targets, files, root, read)
    problems += cycle_problems(targets, known)
    problems += transport_problems(root)
    return sorted(set(problems)), len(targets)


def engine_problems(targets, files, root, read):
    out = []
    # Includes only of its own folder and the folders below it.
    for d, _, names in os.walk(os.path.join(root, "engine")):
        for n in sorted(names):
            if not n.endswith(SOURCE_EXT):
                continue
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            mine = engine_folder(rel)
            if mine == "engine":
                continue
            for inc in INCLUDE.findall(read(p)):
                theirs = engine_folder(inc)
                if theirs is None or theirs == mine or theirs in ENGINE_LAYERS[mine]:
                    continue
                out.append(f"{rel} includes {inc}: {mine}/ may include only "
                           f"{', '.join(f + '/' for f in ENGINE_LAYERS[mine]) or 'itself'} in the engine")
    # One library per folder.
    compiled = collections.defaultdict(set)  # folder -> targets compiling sources there
    for name, fs in files.items():
        if targets[name].get("TYPE") == "EXECUTABLE":
            continue
        for p in fs:
            if not p.endswith((".cc", ".cu")):
                continue
            rel = os.path.relpath(p, root)
            folder = engine_folder(rel)
            if folder is not None and os.path.dirname(rel) == folder:
                compiled[folder].add(name)
    for folder in sorted(set(ENGINE_LAYERS) | {"engine"}):
        if folder in MULTI_TARGET_FOLDERS:
            continue
        owners = compiled.get(folder, set())
        if len(owners) > 1:
            out.append(f"{folder}/ is compiled by {', '.join(sorted(owners))}: one library per engine folder")
        for name in owners:
            others = {os.path.dirname(os.path.relpath(p, root)) for p in files[name] if p.endswith((".cc", ".cu"))}
            others.discard(folder)
            if others:
                out.append(f"{name} compiles {folder}/ and also {', '.join(sorted(others))}: "
                           "one engine folder per library")
    return out


def cycle_problems(targets, known):
    graph = {n: set(link_names(t.get("LINK_LIBRARIES", []) + t.get("INTERFACE_LINK_LIBRARIES", []), known, True))
             for n, t in targets.items()}
    out, state = [], {}

    def visit(n, path):
        state[n] = 1
        for d in sorted(graph[n]):
            if state.get(d) == 1:
                cycle = path[path.index(d):] + [d]
                out.append("link cycle: " + " -> ".join(cycle))
            elif d not in state:
                visit(d, path + [d])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true", help="also check that every planted wrong include is named")
    args = ap.parse_args(argv)
    root = os.path.realpath(args.root)
    problems, count = check(args.manifest, root)
    for p in problems:
        print(p)
    if problems:
        print(f"layering: {len(problems)} violation(s)")
        return 1
    print(f"layering: {count} targets include only their own folders and their link closures; "
          "the engine's folders are libraries in one order; no link cycle; no transport in transport-free code")
    if not args.self_test:
        return 0
    missed = []
    for path, inc in SEEDS:
        if not os.path.isfile(os.path.join(root, path)):
            missed.append(f"{path}: the seed's file is gone (update SEEDS)")
            continue
        found, _ = check(args.manifest, root, {path: inc})
        if not any(path in p and inc in p for p in found):
            missed.append(f"{path} including {inc} was not named")
        else:
            print(f"self-test: {path} including {inc}: named ({sum(path in p and inc in p for p in found)} rule(s))")
    for m in missed:
        print("self-test FAILED: " + m)
    return 1 if missed else 0


def transport_problems(root):
    out = []
    free = ["common", "model", "kernels", "engine"]
    for svc in sorted(os.listdir(os.path.join(root, "services"))):
        for part in ("index", "placement", "frontend"):
            if os.path.isdir(os.path.join(root, "services", svc, part)):
                free.append(os.path.join("services", svc, part))
    grpc = re.compile(r'#include [<"](grpcpp/|grpc/|[^">]*\.pb\.h|[^">]*\.grpc\.pb\.h)')
    channel = re.compile(r"grpc::(CreateChannel|CreateCustomChannel)\(")
    server = re.compile(r"grpc::ServerBuilder\b")
    for top in ["common", "model", "kernels", "engine", "services", "tools", "bench", "tests"]:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if not n.endswith(SOURCE_EXT):
                    continue
                p = os.path.join(d, n)
                rel = os.path.relpath(p, root)
                with open(p, errors="replace") as f:
                    text = f.read()
                if any(rel.startswith(fd + os.sep) for fd in free) and grpc.search(text):
                    out.append(f"{rel}: gRPC or a generated proto header in transport-free code")
                if channel.search(text) and rel != "services/transport/grpc/grpc_channel.cc":
                    out.append(f"{rel}: builds a client channel (use CreateClientChannel, services/transport/)")
                if server.search(text) and rel != "services/transport/grpc/grpc_server.cc" and not rel.startswith("tests/"):
                    out.append(f"{rel}: builds a server (use StartGrpcServer, services/transport/)")
    return out


if __name__ == "__main__":
    sys.exit(main())
