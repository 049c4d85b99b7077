"""Infill through every API of a live dllm-server on the trained tinycode
model: llama-server's POST /infill with the exact requests the editor
plugins llama.vim and llama.vscode send (recorded from their source as
facts: tests/service/http/infill_requests.json), whole and streamed, read
back the way each plugin reads its reply; OpenAI's `suffix`; gRPC's
Prompt.suffix (through dllm-client). The three give the same tokens for
the same seed, and the infill quality figure through the API equals
`dllm eval --infill` on the same windows.

  infill_test.py --server build/service/dllm-server --client build/client/dllm-client
                 --dllm build/service/dllm --model tests/data/models/tinycode-dream-q4_k_m.gguf
                 --src .
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy"))
import dllm_ops  # noqa: E402

ARGS = None
HERE = os.path.dirname(os.path.abspath(__file__))


def post(port, path, body, headers=None, raw=None):
    """(status, {header: value}, body text); `raw` sends bytes as they are."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    data = raw if raw is not None else json.dumps(body).encode("utf-8")
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    conn.request("POST", path, body=data, headers=h)
    r = conn.getresponse()
    text = r.read().decode("utf-8")
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    conn.close()
    return r.status, hdrs, text


def sse_data(text):
    """The data payloads of an event stream (comments skipped)."""
    out = []
    for block in text.split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                out.append(line[len("data: "):])
    return out


def llama_vim_reads(text):
    """What llama.vim keeps of a reply (autoload/llama.vim s:fim_on_response):
    a body starting with `{` holding `"content"` then `:"` with no space
    between, on one line, json_decode'd; None when it would drop it."""
    if "\n" in text.strip() or not re.match(r"^\s*\{", text) or not re.search(r'"content"\s*:"', text):
        return None
    return json.loads(text)


def llama_vscode_contents(reply):
    """llama.vscode's getComplFromContent: [content] of an object that has
    one, else the contents of an array of them, without repeats."""
    if isinstance(reply, dict) and "content" in reply:
        return [reply["content"] or ""]
    seen = []
    for r in reply:
        if r.get("content") not in seen:
            seen.append(r.get("content"))
    return seen


class Server:
    replica = None

    @classmethod
    def get(cls):
        if cls.replica is None:
            work = dllm_ops.tmpdir("dllm-infill-")
            cls.replica = dllm_ops.Replica("infill", ARGS.server, ARGS.model, work,
                                           ["--threads", "1"]).start()
        return cls.replica


class PluginRequestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port = Server.get().http_port
        with open(os.path.join(HERE, "infill_requests.json")) as f:
            cls.recorded = json.load(f)

    def request(self, name):
        body = json.loads(json.dumps(self.recorded[name]["body"]))
        # Instrumented builds: a shorter span than the plugins' 128.
        if ARGS.max_span > 0 and body.get("n_predict", 0) > ARGS.max_span:
            body["n_predict"] = ARGS.max_span
        return body

    def headers(self, name):
        return dict(self.recorded[name]["headers"])

    def test_llama_vim_completion_whole(self):
        status, hdrs, text = post(self.port, "/infill", self.request("llama.vim fim"),
                                  self.headers("llama.vim fim"))
        self.assertEqual(status, 200, text)
        reply = llama_vim_reads(text)
        self.assertIsNotNone(reply, "llama.vim would drop this reply: %r" % text[:200])
        # response_fields: the asked paths as flat keys, nothing else.
        asked = self.recorded["llama.vim fim"]["body"]["response_fields"]
        self.assertEqual(list(reply), asked)
        self.assertIsInstance(reply["content"], str)
        self.assertGreater(len(reply["content"]), 0)
        for key in ("timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_second",
                    "timings/predicted_n", "timings/predicted_ms", "timings/predicted_per_second"):
            self.assertIsInstance(reply[key], (int, float), key)
        self.assertIs(reply["truncated"], False)
        self.assertIsInstance(reply["tokens_cached"], int)
        # n_indent 4: no line after the first starts left of column 4.
        for line in reply["content"].split("\n")[1:]:
            if line.strip():
                self.assertGreaterEqual(len(line) - len(line.lstrip(" \t")), 4, reply["content"])

    def test_llama_vim_warm_up_is_answered_with_an_empty_object(self):
        status, _, text = post(self.port, "/infill", self.request("llama.vim warm-up"),
                               self.headers("llama.vim warm-up"))
        self.assertEqual((status, text), (200, "{}"))

    def test_llama_vscode_completion_whole(self):
        status, _, text = post(self.port, "/infill", self.request("llama.vscode fim"),
                               self.headers("llama.vscode fim"))
        self.assertEqual(status, 200, text)
        reply = json.loads(text)
        # n_cmpl 3: an array of three results, ordered by index.
        self.assertIsInstance(reply, list)
        self.assertEqual([r["index"] for r in reply], [0, 1, 2])
        contents = llama_vscode_contents(reply)
        self.assertTrue(all(isinstance(c, str) and c for c in contents), contents)
        for r in reply:
            self.assertIsInstance(r["generation_settings"]["n_ctx"], int)
            self.assertIsInstance(r["tokens_cached"], int)
            for key in ("prompt_n", "predicted_n"):
                self.assertIsInstance(r["timings"][key], int)
            for key in ("prompt_ms", "prompt_per_second", "predicted_ms", "predicted_per_second"):
                self.assertIsInstance(r["timings"][key], float)
            self.assertIs(r["stop"], True)
            self.assertIn(r["stop_type"], ("eos", "limit", "word"))

    def test_llama_vscode_warm_up(self):
        status, _, text = post(self.port, "/infill", self.request("llama.vscode warm-up"),
                               self.headers("llama.vscode warm-up"))
        self.assertEqual(status, 200, text)
        reply = json.loads(text)
        self.assertEqual(reply["content"], "")
        self.assertEqual(reply["tokens_predicted"], 0)
        self.assertIn("generation_settings", reply)

    def test_both_plugins_streamed(self):
        for name in ("llama.vim fim", "llama.vscode fim"):
            with self.subTest(plugin=name):
                body = self.request(name)
                body.pop("response_fields", None)
                # The time limit would make the two runs' texts depend on timing.
                body.pop("t_max_predict_ms", None)
                body["n_cmpl"] = 1
                status, _, whole_text = post(self.port, "/infill", body, self.headers(name))
                self.assertEqual(status, 200, whole_text)
                whole = json.loads(whole_text)
                body["stream"] = True
                status, hdrs, text = post(self.port, "/infill", body, self.headers(name))
                self.assertEqual(status, 200, text)
                self.assertTrue(hdrs["content-type"].startswith("text/event-stream"))
                chunks = [json.loads(d) for d in sse_data(text)]
                self.assertNotIn("[DONE]", text)  # llama-server's /infill sends none
                self.assertTrue(all(c["stop"] is False for c in chunks[:-1]))
                self.assertIs(chunks[-1]["stop"], True)
                self.assertEqual(chunks[-1]["content"], "")
                self.assertEqual("".join(c["content"] for c in chunks), whole["content"])

    def test_a_stop_string_ends_the_text_and_is_no_cancel(self):
        body = {"input_prefix": "def add(a, b):\n", "input_suffix": "\n\nprint(add(1, 2))\n",
                "prompt": "    return ", "n_predict": 24}
        status, _, text = post(self.port, "/infill", body)
        self.assertEqual(status, 200, text)
        whole = json.loads(text)["content"]
        self.assertGreaterEqual(len(whole), 4, whole)
        stop = whole[len(whole) // 2:len(whole) // 2 + 2]
        replica = Server.get()

        def finished():
            m = replica.metrics()
            return {reason: dllm_ops.metric_sum(m, "dllm_requests_finished_total",
                                                finish_reason=reason)
                    for reason in ("eos", "length", "cancelled", "stop", "error")}

        before = finished()
        status, _, text = post(self.port, "/infill", dict(body, stop=[stop]))
        self.assertEqual(status, 200, text)
        reply = json.loads(text)
        self.assertEqual(reply["content"], whole[:whole.index(stop)])
        self.assertEqual((reply["stop_type"], reply["stopping_word"]), ("word", stop))
        after = finished()
        # Ended early for a complete text, or run to the end: never a cancel.
        self.assertEqual(after.get("cancelled", 0), before.get("cancelled", 0))
        self.assertEqual(sum(after.values()), sum(before.values()) + 1)

    def test_n_cmpl_with_stream_is_refused(self):
        body = self.request("llama.vscode fim")
        body["stream"] = True
        status, _, text = post(self.port, "/infill", body, self.headers("llama.vscode fim"))
        self.assertEqual(status, 400, text)
        err = json.loads(text)["error"]
        self.assertEqual(err["code"], 400)
        self.assertTrue(err["message"].startswith("n_cmpl:"), err)

    def test_bad_input_names_the_field(self):
        base = {"input_prefix": "def f(x):\n", "input_suffix": "\n", "n_predict": 8}
        cases = [
            ({"input_extra": {"text": "x"}}, "input_extra:"),
            ({"input_extra": [{"filename": "a.py"}]}, "input_extra[0].text:"),
            ({"input_extra": [{"text": "x"}, {"text": "y", "filename": 3}]},
             "input_extra[1].filename:"),
            ({"input_extra": ["x"]}, "input_extra[0]:"),
            ({"n_predict": 1 << 20}, "n_predict:"),
            ({"n_predict": "8"}, "n_predict:"),
            ({"input_suffix": 3}, "input_suffix:"),
            ({"input_prefix": None}, "input_prefix:"),
            ({"lora": [{"id": 0, "scale": 0.5}]}, "lora:"),
            ({"min_p": 0.1}, "min_p:"),
            ({"n_cmpl": 9}, "n_cmpl:"),
        ]
        for extra, field in cases:
            with self.subTest(extra=extra):
                body = dict(base)
                body.update(extra)
                status, _, text = post(self.port, "/infill", body)
                self.assertEqual(status, 400, text)
                err = json.loads(text)["error"]
                self.assertEqual(set(err), {"code", "message", "type"}, err)
                self.assertTrue(err["message"].startswith(field), (field, err))
        # Invalid UTF-8 in a field's value: the body is not JSON, named there.
        raw = b'{"input_prefix": "def f(x):\\n", "input_suffix": "ok\xff", "n_predict": 8}'
        status, _, text = post(self.port, "/infill", None, raw=raw)
        self.assertEqual(status, 400, text)
        self.assertIn("input_suffix: invalid UTF-8", json.loads(text)["error"]["message"])

    def test_a_long_prefix_and_suffix_are_trimmed_at_their_far_ends(self):
        # tinycode's context is 1024 tokens: 3000 lines cannot fit.
        prefix = "".join("x%d = %d\n" % (i, i) for i in range(1500))
        suffix = "".join("y%d = %d\n" % (i, i) for i in range(1500))
        body = {"input_prefix": prefix, "input_suffix": suffix, "prompt": "z = ",
                "n_predict": 16, "input_extra": [{"text": "w = 1\n" * 200, "filename": "w.py"}]}
        status, _, text = post(self.port, "/infill", body)
        self.assertEqual(status, 200, text)
        reply = json.loads(text)
        self.assertIs(reply["truncated"], True)
        trimmed = reply["dllm"]["trimmed"]
        self.assertGreater(trimmed["prefix_tokens"], 0)
        self.assertGreater(trimmed["suffix_tokens"], 0)
        self.assertGreater(trimmed["extra_tokens"], 0)
        # What was kept is the text nearest the cursor: the prefix's end.
        self.assertTrue(reply["prompt"].endswith("x1499 = 1499\nz = "), reply["prompt"][-60:])
        self.assertLessEqual(reply["tokens_evaluated"] + 16, 1024)


class SameTokensTest(unittest.TestCase):
    """The three infill interfaces, same seed and settings: the same tokens."""

    PREFIX = "def fibonacci(n):\n    if n < 2:\n        return n\n    return "
    SUFFIX = "\n\n\ndef main():\n    print(fibonacci(10))\n"

    @classmethod
    def setUpClass(cls):
        cls.server = Server.get()

    def test_grpc_openai_and_infill_agree(self):
        # /infill's default blocks (issue #40) are its own: the same blocks
        # are asked of every interface.
        settings = {"temperature": 0.7, "seed": 11, "steps": 24, "block_length": 8}
        status, _, text = post(self.server.http_port, "/infill",
                               dict(settings, input_prefix=self.PREFIX, input_suffix=self.SUFFIX,
                                    n_predict=24))
        self.assertEqual(status, 200, text)
        infill = json.loads(text)
        status, _, text = post(self.server.http_port, "/v1/completions",
                               dict(settings, prompt=self.PREFIX, suffix=self.SUFFIX,
                                    max_tokens=24))
        self.assertEqual(status, 200, text)
        openai = json.loads(text)
        out = subprocess.run([ARGS.client, "generate", "--target", self.server.target, "--json",
                              "--gen-length", "24", "--steps", "24", "--temperature", "0.7",
                              "--block-length", "8", "--seed", "11", "--suffix", self.SUFFIX,
                              self.PREFIX],
                             capture_output=True, text=True, check=True).stdout
        final = [json.loads(l) for l in out.splitlines() if '"final"' in l][-1]["final"]
        grpc_ids = [int(t) for t in final.get("token_ids", [])]
        self.assertEqual(infill["dllm"]["token_ids"], grpc_ids)
        self.assertEqual(openai["dllm"]["token_ids"], grpc_ids)
        self.assertEqual(infill["content"], openai["choices"][0]["text"])
        self.assertEqual(openai["choices"][0]["text"], final.get("text", ""))
        # And the CLI, in process: `dllm generate --suffix`.
        out = subprocess.run([ARGS.dllm, "generate", "--model", ARGS.model, "--json",
                              "--gen-length", "24", "--steps", "24", "--temperature", "0.7",
                              "--block-length", "8", "--seed", "11", "--threads", "1",
                              "--prompt", self.PREFIX,
                              "--suffix", self.SUFFIX],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual(json.loads(out)["output_ids"], grpc_ids)
        # A different seed draws differently (the seed is really used).
        status, _, text = post(self.server.http_port, "/v1/completions",
                               dict(settings, seed=12, prompt=self.PREFIX, suffix=self.SUFFIX,
                                    max_tokens=24))
        self.assertNotEqual(json.loads(text)["dllm"]["token_ids"], grpc_ids)

    def test_threshold_decoding_and_caches_work_on_a_span(self):
        for extra in ({"threshold": 0.05, "algorithm": "maskgit_plus", "block_length": 32},
                      {"cache": "dual", "block_length": 8}):
            with self.subTest(extra=extra):
                body = dict(extra, seed=1, input_prefix=self.PREFIX, input_suffix=self.SUFFIX,
                            n_predict=32)
                status, _, text = post(self.server.http_port, "/infill", body)
                self.assertEqual(status, 200, text)
                infill = json.loads(text)
                status, _, text = post(self.server.http_port, "/v1/completions",
                                       dict(extra, seed=1, prompt=self.PREFIX, suffix=self.SUFFIX,
                                            max_tokens=32))
                self.assertEqual(status, 200, text)
                openai = json.loads(text)
                self.assertEqual(infill["dllm"]["token_ids"], openai["dllm"]["token_ids"])
                if "threshold" in extra:  # several tokens a step: fewer steps than positions
                    self.assertLess(openai["dllm"]["steps"], 32)

    def test_events_cover_the_span_alone(self):
        status, _, text = post(self.server.http_port, "/v1/completions",
                               {"prompt": self.PREFIX, "suffix": self.SUFFIX, "max_tokens": 16,
                                "stream": True, "dllm_canvas": True})
        self.assertEqual(status, 200, text)
        canvases = [json.loads(d) for d in sse_data(text) if '"canvas"' in d]
        self.assertGreater(len(canvases), 1)
        for c in canvases:
            self.assertEqual(len(c["canvas"]), 16)
            self.assertTrue(all(t["position"] < 16 for t in c["committed"]))
        # The suffix is counted as input, not output.
        status, _, text = post(self.server.http_port, "/v1/completions",
                               {"prompt": self.PREFIX, "suffix": self.SUFFIX, "max_tokens": 16})
        usage = json.loads(text)["usage"]
        status, _, plain = post(self.server.http_port, "/v1/completions",
                                {"prompt": self.PREFIX, "max_tokens": 16})
        self.assertGreater(usage["prompt_tokens"], json.loads(plain)["usage"]["prompt_tokens"])

    def test_a_suffix_longer_than_the_context_is_refused(self):
        status, _, text = post(self.server.http_port, "/v1/completions",
                               {"prompt": "def f():", "suffix": "x = 1\n" * 2000, "max_tokens": 8})
        self.assertEqual(status, 400, text)
        err = json.loads(text)["error"]
        self.assertEqual(err["param"], "suffix", err)


class EditorLatencyTest(unittest.TestCase):
    """Issue #40: t_max_predict_ms honoured the diffusion way, the schedule
    that makes it useful, cache_prompt, and honest timings."""

    PREFIX = "import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\ndef perimeter(r):\n"
    SUFFIX = "\n\nprint(area(2), perimeter(2))\n"

    @classmethod
    def setUpClass(cls):
        cls.port = Server.get().http_port

    def infill(self, **fields):
        body = dict(input_prefix=self.PREFIX, input_suffix=self.SUFFIX, prompt="    ",
                    n_predict=ARGS.max_span or 128)
        body.update(fields)
        status, _, text = post(self.port, "/infill", body)
        self.assertEqual(status, 200, text)
        return json.loads(text)

    def test_the_span_is_decoded_in_small_blocks_unless_asked(self):
        reply = self.infill(n_predict=128)
        self.assertEqual(reply["dllm"]["block_length"], 16)
        self.assertEqual(reply["dllm"]["cache"], "none")  # exact decoding
        self.assertEqual(self.infill(n_predict=96, steps=48)["dllm"]["block_length"], 16)
        self.assertEqual(self.infill(n_predict=24)["dllm"]["block_length"], 12)
        self.assertEqual(self.infill(n_predict=128, block_length=64)["dllm"]["block_length"], 64)
        self.assertEqual(self.infill(n_predict=31)["dllm"]["block_length"], 0)  # no 8-16 divisor

    def test_cache_prompt_selects_the_dual_cache_and_cache_wins(self):
        span = min(ARGS.max_span or 64, 64)
        cached = self.infill(n_predict=span, cache_prompt=True)
        self.assertEqual(cached["dllm"]["cache"], "dual")
        exact = self.infill(n_predict=span, cache_prompt=False)
        self.assertEqual(exact["dllm"]["cache"], "none")
        told = self.infill(n_predict=span, cache_prompt=True, cache="none")
        self.assertEqual(told["dllm"]["cache"], "none")
        # The same tokens as /v1/completions asked for the same cache and blocks.
        for reply, cache in ((cached, "dual"), (told, "none")):
            status, _, text = post(self.port, "/v1/completions",
                                   {"prompt": self.PREFIX + "    ", "suffix": self.SUFFIX,
                                    "max_tokens": span, "cache": cache,
                                    "block_length": reply["dllm"]["block_length"]})
            self.assertEqual(status, 200, text)
            self.assertEqual(json.loads(text)["dllm"]["token_ids"], reply["dllm"]["token_ids"],
                             cache)

    def test_a_time_budget_returns_the_committed_front_in_whole_lines(self):
        whole = self.infill(cache_prompt=True)
        returned = []
        for t_max in (1, 60, 150):
            timed = self.infill(cache_prompt=True, t_max_predict_ms=t_max)
            content = timed["content"]
            self.assertEqual(timed["stop_type"], "limit", timed)
            # Committed tokens never change: what came back is the front of
            # the untimed answer, cut at its last newline when it has one.
            self.assertTrue(whole["content"].startswith(content), (content, whole["content"]))
            if "\n" in whole["content"][:len(content)] or content.endswith("\n"):
                self.assertTrue(content.endswith("\n"), content)
            self.assertLess(timed["dllm"]["steps"], whole["dllm"]["steps"])
            # predicted_n counts the returned tokens.
            ids = timed["dllm"]["token_ids"]
            n = timed["timings"]["predicted_n"]
            self.assertEqual(n, len(ids))
            self.assertEqual(ids, whole["dllm"]["token_ids"][:n])
            returned.append(content)
            self.assertEqual(n == 0, content == "", timed["timings"])
            per_second = timed["timings"]["predicted_per_second"]
            if timed["timings"]["predicted_ms"] > 0:
                self.assertAlmostEqual(per_second, 1e3 * n / timed["timings"]["predicted_ms"],
                                       places=6)
        print("returned within 1, 60, 150 ms: %r" % returned, file=sys.stderr)
        self.assertTrue(any(returned), "every budget returned nothing: the test saw no cut")

    def test_a_timed_stream_sends_whole_lines(self):
        status, _, text = post(self.port, "/infill",
                               dict(input_prefix=self.PREFIX, input_suffix=self.SUFFIX,
                                    prompt="    ", n_predict=ARGS.max_span or 128,
                                    cache_prompt=True, stream=True, t_max_predict_ms=60))
        self.assertEqual(status, 200, text)
        chunks = [json.loads(d) for d in sse_data(text)]
        self.assertTrue(chunks[-1]["stop"])
        deltas = [c["content"] for c in chunks[:-1]]
        streamed = "".join(deltas)
        for d in deltas[:-1]:
            self.assertTrue(d.endswith("\n"), deltas)
        if "\n" in streamed:
            self.assertTrue(streamed.endswith("\n"), streamed)

    def test_timings_count_the_first_forward_as_the_prompt(self):
        reply = self.infill(cache_prompt=True)
        t = reply["timings"]
        self.assertGreater(t["prompt_ms"], 0)
        self.assertGreater(t["predicted_ms"], 0)
        # One forward over the canvas is a small part of a whole run's
        # time (it was the whole wait before the first stable text).
        self.assertLess(t["prompt_ms"], 1e3 * reply["dllm"]["total_seconds"])
        self.assertEqual(t["prompt_n"], reply["tokens_evaluated"])
        self.assertEqual(t["predicted_n"], reply["tokens_predicted"])


class QualityTest(unittest.TestCase):
    """The infill figure through the gRPC API equals `dllm eval --infill`'s."""

    def test_api_infill_matches_eval(self):
        server = Server.get()
        windows_path = os.path.join(ARGS.src, "tests", "data", "quality", "windows.json")
        work = dllm_ops.tmpdir("dllm-infill-eval-")
        result_path = os.path.join(work, "eval.json")
        if ARGS.windows > 0:  # a sanitizer build: the first N windows, for both sides
            with open(windows_path) as f:
                doc = json.load(f)
            doc["windows"] = doc["windows"][:ARGS.windows]
            windows_path = os.path.join(work, "windows.json")
            with open(windows_path, "w") as f:
                json.dump(doc, f)
        subprocess.run([ARGS.dllm, "eval", "--model", ARGS.model, "--windows", windows_path,
                        "--infill", "--threads", "1", "--json", result_path],
                       check=True, capture_output=True)
        with open(result_path) as f:
            expected = json.load(f)["infill"]
        with open(windows_path) as f:
            windows = json.load(f)["windows"]
        exact = right = total = 0
        for w in windows:
            tokens, start, end = w["tokens"], w["infill"]["start"], w["infill"]["end"]
            span = end - start
            # The span as the sampler left it (the last step's canvas), as
            # the eval scores it: early exit may leave masks after an EOS.
            out = subprocess.run(
                [ARGS.client, "generate", "--target", server.target, "--json", "--detail", "canvas",
                 "--gen-length", str(span), "--steps", str(span), "--temperature", "0",
                 "--tokens", ",".join(map(str, tokens[:start])),
                 "--suffix-tokens", ",".join(map(str, tokens[end:]))],
                capture_output=True, text=True, check=True).stdout
            steps = [json.loads(l)["step"] for l in out.splitlines() if '"step"' in l]
            canvas = [int(t) for t in steps[-1]["canvas"]]
            self.assertEqual(len(canvas), span)
            ok = sum(1 for i, t in enumerate(tokens[start:end]) if canvas[i] == t)
            right += ok
            exact += ok == span
            total += span
        self.assertEqual(total, expected["tokens"])
        self.assertAlmostEqual(right / total, expected["token_accuracy"], places=9)
        self.assertAlmostEqual(exact / len(windows), expected["exact_match"], places=9)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--client", required=True)
    p.add_argument("--dllm", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--windows", type=int, default=0, help="quality windows to use (0: all)")
    p.add_argument("--max-span", type=int, default=0,
                   help="cap the recorded requests' n_predict (0: as recorded)")
    ARGS, rest = p.parse_known_args()
    try:
        program = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    finally:
        if Server.replica is not None:
            Server.replica.stop()
    if Server.replica is not None and not program.result.wasSuccessful():
        print("--- server log ---\n%s" % Server.replica.read_log())
    sys.exit(0 if program.result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
