#!/usr/bin/env python3
"""Holds the service's code to sizes a reader can take in at once: no
function in service/ longer than MAX_FUNCTION_LINES, no file longer than
MAX_FILE_LINES. Functions (lambdas included) are found by universal-ctags,
which reports where each definition ends.

usage: check_sizes.py CTAGS SOURCE_DIR
       check_sizes.py --self-test CTAGS SOURCE_DIR   (plants a long function
       and a long file in a scratch tree and fails unless both are reported)
"""
import pathlib
import subprocess
import sys
import tempfile

MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 500
ROOTS = ("service",)


def functions(ctags, root):
    """(path, name, first line, last line) of every function definition."""
    out = subprocess.run(
        [ctags, "-R", "--languages=C++", "--kinds-C++=f", "--fields=+ne", "-o", "-", "."],
        cwd=root, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split("\t")
        fields = dict(p.split(":", 1) for p in parts[3:] if ":" in p)
        if "line" in fields and "end" in fields:
            yield parts[1], parts[0], int(fields["line"]), int(fields["end"])


def check(ctags, source_dir):
    problems = []
    for top in ROOTS:
        root = source_dir / top
        for path in sorted(root.rglob("*")):
            if path.suffix not in (".cc", ".h"):
                continue
            n = len(path.read_text(errors="replace").splitlines())
            if n > MAX_FILE_LINES:
                problems.append(f"{path.relative_to(source_dir)}: {n} lines "
                                f"(at most {MAX_FILE_LINES})")
        for rel, name, first, last in functions(ctags, root):
            n = last - first + 1
            if n > MAX_FUNCTION_LINES:
                problems.append(f"{top}/{rel}:{first}: {name} is {n} lines "
                                f"(at most {MAX_FUNCTION_LINES})")
    return sorted(problems)


def self_test(ctags, source_dir):
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        (root / "service/planted").mkdir(parents=True)
        body = "".join(f"  x += {i};\n" for i in range(MAX_FUNCTION_LINES))
        (root / "service/planted/long.cc").write_text(
            f"int Long(int x) {{\n{body}  return x;\n}}\n")
        (root / "service/planted/big.h").write_text("// line\n" * (MAX_FILE_LINES + 1))
        found = check(ctags, root)
    wanted = ["Long is", "big.h:"]
    if len(found) == 2 and all(any(w in f for f in found) for w in wanted):
        print("check_sizes --self-test: the planted function and file were reported")
        return 0
    print(f"check_sizes --self-test: expected the planted function and file, got {found}")
    return 1


def main():
    args = sys.argv[1:]
    if args[0] == "--self-test":
        return self_test(args[1], pathlib.Path(args[2]))
    problems = check(args[0], pathlib.Path(args[1]))
    for p in problems:
        print(p)
    print(f"check_sizes: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
