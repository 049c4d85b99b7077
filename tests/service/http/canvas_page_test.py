"""The live canvas page (GET /) in a real browser: Debian's chromium,
headless, driven by puppeteer-core (canvas_page_test.mjs) against a
dllm-server that needs an API key, on the trained tinycode model. With
--screenshot, the page after a finished run is saved there (docs/).

  canvas_page_test.py --server build/service/dllm-server
                      --model tests/data/models/tinycode-dream-q4_k_m.gguf --src .
                      [--screenshot docs/canvas-page.png]

Exits 77 (skipped) when there is no chromium.
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "deploy"))
import dllm_ops  # noqa: E402

KEY = "sk-page-0123456789"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--screenshot", default="")
    args = p.parse_args()
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or ""
    if not chromium:
        print("no chromium (apt-get install chromium): skipped")
        return 77
    subprocess.run([os.path.join(args.src, "tests", "tools", "install-node-deps")], check=True)
    work = dllm_ops.tmpdir("dllm-page-")
    key_file = os.path.join(work, "key")
    with open(key_file, "w") as f:
        f.write(KEY + "\n")
    server = dllm_ops.Replica("page", args.server, args.model, work,
                              ["--threads", "1", "--api-key-file", key_file]).start()
    try:
        env = dict(os.environ, CHROMIUM=chromium, DLLM_API_KEY=KEY)
        cmd = ["node", os.path.join(HERE, "canvas_page_test.mjs"),
               "http://127.0.0.1:%d" % server.http_port,
               args.screenshot or os.path.join(work, "page.png"),
               "http://127.0.0.1:%d/metrics" % server.metrics_port]
        result = subprocess.run(cmd, env=env, timeout=500)
        if result.returncode != 0:
            print("--- server log ---\n" + server.read_log())
        return result.returncode
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
