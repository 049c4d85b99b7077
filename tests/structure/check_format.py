#!/usr/bin/env python3
"""Holds every C and C++ source of the project to .clang-format (Google
style, 100 columns), as the Layering test holds the includes: a file that
clang-format would change fails the suite, naming the file and the first
lines that differ. Fix with `clang-format -i FILE`.

usage: check_format.py CLANG_FORMAT SOURCE_DIR
       check_format.py --self-test CLANG_FORMAT SOURCE_DIR   (plants a
       misformatted file in a scratch tree and fails unless it is reported)
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

FOLDERS = ["bench", "client", "engine", "kernels", "service", "tests"]
SUFFIXES = {".c", ".cc", ".h"}
SKIP = {"node_modules"}


def sources(root):
    """The project's C/C++ files: git's list when there is one (so build
    trees and untracked scratch are left out), else a walk of FOLDERS."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True,
                             capture_output=True).stdout.decode()
        files = [root / f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [p for d in FOLDERS for p in (root / d).rglob("*")]
    return sorted(p for p in files
                  if p.suffix in SUFFIXES and p.is_file() and not SKIP & set(p.parts)
                  and p.relative_to(root).parts[0] in FOLDERS)


def misformatted(clang_format, root):
    """[(relative path, first differing line)] for each file clang-format would change."""
    bad = []
    for path in sources(root):
        text = path.read_text(encoding="utf-8")
        formatted = subprocess.run([clang_format, "--style=file", f"--assume-filename={path}"],
                                   input=text, capture_output=True, text=True, check=True,
                                   cwd=root).stdout
        if formatted != text:
            a, b = text.splitlines(), formatted.splitlines()
            line = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            bad.append((path.relative_to(root), line + 1))
    return bad


def main(argv):
    self_test = argv[1:2] == ["--self-test"]
    args = argv[2:] if self_test else argv[1:]
    if len(args) != 2:
        print(__doc__)
        return 2
    clang_format, root = args[0], pathlib.Path(args[1]).resolve()
    if shutil.which(clang_format) is None:
        print(f"check_format: {clang_format} not found (scripts/setup-deps installs clang-format-14)")
        return 1
    if self_test:
        with tempfile.TemporaryDirectory() as tmp:
            scratch = pathlib.Path(tmp)
            shutil.copy(root / ".clang-format", scratch / ".clang-format")
            (scratch / "engine").mkdir()
            (scratch / "engine" / "ok.cc").write_text("int Ok() { return 1; }\n")
            (scratch / "engine" / "bad.cc").write_text("int  Bad( ) {return 2;}\n")
            found = misformatted(clang_format, scratch)
            if [str(p) for p, _ in found] != ["engine/bad.cc"]:
                print(f"check_format self-test: expected engine/bad.cc alone, got {found}")
                return 1
            print("check_format self-test: the misformatted file was reported")
            return 0
    bad = misformatted(clang_format, root)
    for path, line in bad:
        print(f"{path}:{line}: not formatted (clang-format -i {path})")
    if bad:
        print(f"check_format: {len(bad)} files differ from .clang-format")
        return 1
    print(f"check_format: {len(sources(root))} files follow .clang-format")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
