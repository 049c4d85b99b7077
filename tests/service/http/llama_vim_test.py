"""A real editor against dllm-server's /infill (issue #40): Vim 9 with
ggml-org's llama.vim plugin, in tmux, typing into a Python file as a user
would; the plugin's hint appears, Tab accepts it, and the saved file holds
it.

The plugin is not part of this repository: the test takes the path of its
released files (a checkout of github.com/ggml-org/llama.vim, e.g. at
a1c8e6e), from --plugin or DLLM_LLAMA_VIM, and skips (exit 77) without them
or without vim and tmux (Debian: apt-get install vim-nox tmux).

  llama_vim_test.py --server build/service/dllm-server
                    --model tests/data/models/tinycode-dream-q4_k_m.gguf
                    [--plugin /path/to/llama.vim]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy"))
import dllm_ops  # noqa: E402

ARGS = None
SKIP = 77


def tmux(*args, check=True):
    return subprocess.run(["tmux", "-L", "dllm-llama-vim"] + list(args), capture_output=True,
                          text=True, check=check).stdout


class LlamaVimTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = dllm_ops.tmpdir("dllm-llama-vim-")
        cls.server = dllm_ops.Replica("llama-vim", ARGS.server, ARGS.model, cls.work,
                                      ["--threads", "2"]).start()

    @classmethod
    def tearDownClass(cls):
        tmux("kill-server", check=False)
        cls.server.stop()

    def completions_run(self):
        """The runs the server has finished (its log says one a request)."""
        with open(self.server.log_path) as f:
            return sum(1 for line in f if ": request req-" in line)

    def screen(self):
        return tmux("capture-pane", "-p", "-t", "vim")

    def test_a_hint_appears_and_tab_accepts_it(self):
        vimrc = os.path.join(self.work, "vimrc")
        with open(vimrc, "w") as f:
            f.write("set nocompatible\n"
                    "set noswapfile nobackup\n"
                    "filetype plugin indent on\n"
                    "syntax off\n"
                    "let g:llama_config = {'endpoint_fim': 'http://127.0.0.1:%d/infill',"
                    " 'show_info': 2, 'auto_fim': v:true}\n"
                    "set runtimepath^=%s\n"
                    "runtime plugin/llama.vim\n" % (self.server.http_port, ARGS.plugin))
        path = os.path.join(self.work, "example.py")
        with open(path, "w") as f:
            f.write("import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\n")
        with open(path) as f:
            before = f.read()
        tmux("new-session", "-d", "-s", "vim", "-x", "120", "-y", "40",
             "%s -u %s %s" % (ARGS.vim, vimrc, path))
        try:
            time.sleep(1.0)  # vim up, the plugin's warm-up sent
            runs = self.completions_run()
            # To the end of the file, then type a new function's head.
            tmux("send-keys", "-t", "vim", "G", "o")
            tmux("send-keys", "-t", "vim", "-l", "def perimeter(r):")
            tmux("send-keys", "-t", "vim", "Enter")
            # The plugin asks on cursor movement: wait for a completion to
            # come back, then for its hint to be drawn after the cursor.
            dllm_ops.wait_for(lambda: self.completions_run() > runs, 60, "a completion")
            typed_line = None
            hint = None
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and hint is None:
                time.sleep(0.3)
                lines = self.screen().splitlines()
                for i, line in enumerate(lines):
                    if line.startswith("def perimeter(r):"):
                        typed_line = i
                if typed_line is not None and typed_line + 1 < len(lines):
                    shown = lines[typed_line + 1].strip()
                    if shown:  # the (virtual) text after the new line's indent
                        hint = shown
            self.assertIsNotNone(hint, "no hint drawn:\n" + self.screen())
            tmux("send-keys", "-t", "vim", "Tab")
            time.sleep(0.5)
            tmux("send-keys", "-t", "vim", "Escape")
            tmux("send-keys", "-t", "vim", "-l", ":wq")
            tmux("send-keys", "-t", "vim", "Enter")
            dllm_ops.wait_for(lambda: "vim" not in tmux("list-sessions", check=False), 10,
                              "vim to exit")
        finally:
            tmux("kill-session", "-t", "vim", check=False)
        with open(path) as f:
            after = f.read()
        print("hint: %r\nfile:\n%s" % (hint, after), file=sys.stderr)
        self.assertTrue(after.startswith(before + "def perimeter(r):\n"), after)
        added = after[len(before + "def perimeter(r):\n"):]
        # What Tab inserted is the hint (its first line at least), not a tab.
        self.assertIn(hint.split()[0], added)
        self.assertNotEqual(added.strip(), "")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--plugin", default=os.environ.get("DLLM_LLAMA_VIM", ""))
    ARGS, rest = p.parse_known_args()
    vim = shutil.which("vim.nox") or shutil.which("vim")
    if not ARGS.plugin or not os.path.isfile(os.path.join(ARGS.plugin, "autoload", "llama.vim")):
        print("llama_vim_test: skipped: no llama.vim (--plugin DIR or DLLM_LLAMA_VIM)")
        sys.exit(SKIP)
    if vim is None or shutil.which("tmux") is None:
        print("llama_vim_test: skipped: needs vim and tmux (apt-get install vim-nox tmux)")
        sys.exit(SKIP)
    ARGS.vim = vim
    program = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    sys.exit(0 if program.result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
