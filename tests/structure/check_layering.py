#!/usr/bin/env python3
"""Holds every project #include to the dependency direction the CMake files
declare, so a backwards include fails the suite rather than waiting for the
linker to maybe notice.

Each engine folder's allowed dependencies are read from its
dllm_engine_library(... DEPS ...) call in engine/CMakeLists.txt (the one
place they are written); the layers above engine are listed below. A folder
may include headers of its own folder and of anything its dependencies
reach, transitively.

usage: check_layering.py SOURCE_DIR
       check_layering.py --self-test SOURCE_DIR   (plants a backwards include
       in a scratch tree and fails unless it is reported)
"""
import pathlib
import re
import shutil
import sys
import tempfile

# Layers outside engine/: folder -> the units it may depend on directly.
# "engine" means every engine runtime folder; "proto" the generated
# dllm/v1/*.pb.h headers.
UPPER_LAYERS = {
    "kernels": [],
    "service/json": ["base"],
    "service/cli": ["engine", "synth", "service/json", "service/engine"],
    "service/metrics": ["engine"],
    # The serving engine, and its two front ends as peers above it: neither
    # front end may include the other.
    "service/engine": ["engine", "service/metrics", "proto"],
    "service/grpc": ["service/engine", "proto"],
    "service/http": ["service/engine", "service/json", "proto"],
    # The server binary's main: the top of the service layers.
    "service/bin": ["service/grpc", "service/http"],
    "client": ["proto", "base"],
}


def engine_deps(source_dir):
    text = (source_dir / "engine/CMakeLists.txt").read_text()
    deps = {}
    for name, body in re.findall(r"dllm_engine_library\((\w+)(.*?)\)\n", text, re.S):
        m = re.search(r"DEPS(.*)", body, re.S)
        listed = m.group(1).split() if m else []
        deps[name] = [d[len("dllm_"):] for d in listed if d.startswith("dllm_")]
    return deps


def unit_of(path):
    """The unit a header path (as #included) or source path belongs to."""
    parts = path.split("/")
    if parts[0] == "engine" and len(parts) > 2:
        return parts[1]
    if parts[0] == "service" and len(parts) > 2:
        return "service/" + parts[1]
    if parts[0] in ("kernels", "client"):
        return parts[0]
    if parts[0] == "dllm" or path.startswith("grpc/health"):
        return "proto"
    return None  # system, Abseil, tests, generated elsewhere


def self_test(source_dir):
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        (root / "engine/gguf").mkdir(parents=True)
        for top in ("kernels", "service", "client"):
            (root / top).mkdir()
        shutil.copy(source_dir / "engine/CMakeLists.txt", root / "engine/CMakeLists.txt")
        (root / "engine/gguf/planted.h").write_text('#include "engine/model/model.h"\n')
        found = check(root)
    if len(found) == 1 and "engine/gguf/planted.h: includes engine/model/model.h" in found[0]:
        print("check_layering --self-test: the planted backwards include was reported")
        return 0
    print(f"check_layering --self-test: expected one report of the planted include, got {found}")
    return 1


def main():
    if sys.argv[1] == "--self-test":
        return self_test(pathlib.Path(sys.argv[2]))
    problems = check(pathlib.Path(sys.argv[1]))
    for p in problems:
        print(p)
    print(f"check_layering: {len(problems)} problem(s)")
    return 1 if problems else 0


def check(source_dir):
    deps = engine_deps(source_dir)
    if not {"base", "model", "session"} <= deps.keys():
        sys.exit("check_layering: could not read the engine libraries from engine/CMakeLists.txt")
    runtime = [name for name in deps if name != "synth"]
    deps["kernels"] = []
    deps["proto"] = []
    for unit, direct in UPPER_LAYERS.items():
        expanded = []
        for d in direct:
            expanded += runtime if d == "engine" else [d]
        deps[unit] = expanded

    def reach(unit, seen=None):
        seen = set() if seen is None else seen
        for d in deps.get(unit, []):
            if d not in seen:
                seen.add(d)
                reach(d, seen)
        return seen

    problems = []
    include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for top in ("engine", "kernels", "service", "client"):
        for path in sorted((source_dir / top).rglob("*")):
            if path.suffix not in (".h", ".cc", ".in"):
                continue
            rel = path.relative_to(source_dir).as_posix()
            unit = unit_of(rel)
            if unit is None or unit not in deps:
                problems.append(f"{rel}: folder {unit!r} has no declared dependencies")
                continue
            allowed = reach(unit) | {unit}
            for header in include.findall(path.read_text(errors="replace")):
                target = unit_of(header)
                if target is not None and target not in allowed:
                    problems.append(f"{rel}: includes {header} ({target}), but {unit} may use only "
                                    f"{', '.join(sorted(allowed - {unit})) or 'nothing else'}")
    return problems


if __name__ == "__main__":
    sys.exit(main())
