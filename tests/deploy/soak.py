#!/usr/bin/python3
"""Soak test for dllm-server: N concurrent streaming clients for a while,
with random cancellations, short deadlines and invalid requests mixed in.
Reports (JSON) requests served, outcomes by gRPC code, step latency
(client-observed gaps between StepEvents and the server's
dllm_step_duration_seconds histogram), and resident memory at start, after
warm-up and at the end. Fails (exit 1) on an unexpected status (e.g. INTERNAL,
or OK for an invalid request), a dead server, or RSS drift >= 2% between the
idle server after warm-up and the idle server at the end (clients paused).

  scripts/soak --server build/service/dllm-server --model M.gguf \\
      --clients 8 --duration 300 --out bench/results/soak-DATE.json
  scripts/soak --target 127.0.0.1:50051 --metrics 127.0.0.1:9464 ...   (a running server)

ctest DeploySoakShort runs it for 30 s with 4 clients.
"""
import argparse
import datetime
import json
import os
import random
import shutil
import statistics
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dllm_ops  # noqa: E402
from dllm_ops import Replica, metric_sum, parse_metrics  # noqa: E402

PROMPTS = ["Tell me about the sea.", "Write a haiku about CPUs.", "What is 2+2?",
           "List three colours.", "Explain diffusion language models in one sentence."]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_kind = {}        # kind -> {code: count}
        self.unexpected = []     # (kind, code, details)
        self.step_gaps = []      # seconds between consecutive StepEvents
        self.completed_tokens = 0

    def record(self, kind, code, expected, details=""):
        with self.lock:
            k = self.by_kind.setdefault(kind, {})
            k[code] = k.get(code, 0) + 1
            if code not in expected and len(self.unexpected) < 50:
                self.unexpected.append({"kind": kind, "code": code, "details": details[:200]})


def percentile(values, p):
    if not values:
        return None
    values = sorted(values)
    i = min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))
    return values[i]


def histogram_quantile(q, buckets):
    """Prometheus-style quantile from cumulative (le, count) pairs."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_c) / max(c - prev_c, 1e-12))
        prev_le, prev_c = le, c
    return prev_le


def step_buckets(metrics):
    out = {}
    for key, v in metrics.items():
        if key == "__families__" or key[0] != "dllm_step_duration_seconds_bucket":
            continue
        le = dict(key[1]).get("le")
        out[float(le)] = out.get(float(le), 0) + v
    return out


class Gate:
    """Lets the main thread pause every client between requests."""

    def __init__(self, clients):
        self.cv = threading.Condition()
        self.paused, self.idle, self.clients = False, 0, clients

    def checkpoint(self):
        with self.cv:
            if self.paused:
                self.idle += 1
                self.cv.notify_all()
                self.cv.wait_for(lambda: not self.paused)
                self.idle -= 1

    def pause(self, timeout):
        with self.cv:
            self.paused = True
            return self.cv.wait_for(lambda: self.idle == self.clients, timeout)

    def resume(self):
        with self.cv:
            self.paused = False
            self.cv.notify_all()


def worker(stubs, target, deadline, stats, rng, mix, gate):
    grpc, pb = stubs.grpc, stubs.pb
    ch = stubs.channel(target)
    stub = stubs.pb_grpc.DiffusionLMStub(ch)
    kinds, weights = zip(*mix.items())
    while time.monotonic() < deadline:
        gate.checkpoint()
        kind = rng.choices(kinds, weights)[0]
        gen = rng.choice([16, 32, 64])
        if kind == "unary":
            try:
                stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=10)
                stub.Tokenize(pb.TokenizeRequest(text=rng.choice(PROMPTS)), timeout=10)
                stats.record(kind, "OK", {"OK"})
            except grpc.RpcError as e:
                stats.record(kind, e.code().name, {"OK"}, e.details() or "")
            continue
        extra, timeout, expected = {}, 120, {"OK", "RESOURCE_EXHAUSTED"}
        if kind == "invalid":
            bad = rng.choice(["block", "steps", "length"])
            if bad == "block":
                extra = {"block_length": gen - 8 if gen > 16 else 24}  # does not divide gen
            elif bad == "steps":
                extra = {"steps": gen * 2}                           # steps > gen_length
            else:
                gen = 1 << 20                                        # beyond the context
            expected = {"INVALID_ARGUMENT"}
        elif kind == "deadline":
            timeout = rng.uniform(0.01, 0.3)
            expected = {"OK", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"}
        elif kind == "cancel":
            expected = {"CANCELLED", "OK", "RESOURCE_EXHAUSTED"}
        steps = extra.pop("steps", None)
        req = stubs.generate_request(rng.choice(PROMPTS), gen_length=gen, steps=steps,
                                     detail="DETAIL_STEPS", seed=rng.randrange(1 << 30),
                                     early_exit=rng.random() < 0.5, **extra)
        cancel_after = rng.randint(1, 8) if kind == "cancel" else None
        call = stub.Generate(req, timeout=timeout)
        events, last, gaps = 0, None, []
        try:
            for ev in call:
                now = time.monotonic()
                if ev.HasField("step"):
                    if last is not None:
                        gaps.append(now - last)
                    last = now
                events += 1
                if cancel_after is not None and events >= cancel_after:
                    call.cancel()
                if ev.HasField("final"):
                    with stats.lock:
                        stats.completed_tokens += gen
            stats.record(kind, "OK", expected)
        except grpc.RpcError as e:
            stats.record(kind, e.code().name, expected, e.details() or "")
        if kind == "normal":
            with stats.lock:
                stats.step_gaps.extend(gaps)
    ch.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", help="dllm-server binary (started on loopback)")
    ap.add_argument("--model", help="GGUF model for --server")
    ap.add_argument("--target", help="HOST:PORT of a running server instead of --server")
    ap.add_argument("--metrics", help="HOST:PORT of its metrics endpoint (with --target)")
    ap.add_argument("--src", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=float, default=300, help="seconds of load")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds excluded from the RSS drift (default: 20%% of --duration)")
    ap.add_argument("--max-drift", type=float, default=2.0, help="percent")
    ap.add_argument("--drift-slack-mib", type=float, default=0.0,
                    help="growth below this many MiB passes whatever the percentage: on a "
                         "tiny test model (~30 MiB RSS) glibc heap trimming alone moves idle "
                         "RSS by a few MiB between two quiet points")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--server-args", default="--max-running 2 --max-queue 16 --threads 2")
    ap.add_argument("--malloc-arena-max", default="2",
                    help="MALLOC_ARENA_MAX for the started server ('' = glibc default), as the "
                         "image and the k8s manifest set it: with one glibc arena per thread, "
                         "gRPC's thread pool keeps adding arenas and idle RSS creeps up")
    ap.add_argument("--out", help="write the JSON report here too")
    args = ap.parse_args()
    if not shutil.which("protoc"):
        print("protoc not found: skipped")
        return 77
    work = dllm_ops.tmpdir("dllm-soak-")
    stubs = dllm_ops.Stubs(os.path.abspath(args.src), work)
    replica = None
    if args.target:
        target, metrics_addr = args.target, args.metrics
    else:
        if not args.server or not os.path.exists(args.server):
            print("dllm-server not built: skipped")
            return 77
        replica = Replica("soak", args.server, args.model, work, args.server_args.split())
        if args.malloc_arena_max:
            os.environ["MALLOC_ARENA_MAX"] = args.malloc_arena_max
        else:
            os.environ.pop("MALLOC_ARENA_MAX", None)
        replica.start()
        replica.wait_ready(stubs)
        target, metrics_addr = replica.target, "127.0.0.1:%d" % replica.metrics_port

    def scrape():
        with urllib.request.urlopen("http://%s/metrics" % metrics_addr, timeout=10) as r:
            return parse_metrics(r.read().decode())

    def rss():
        if replica is not None:
            return replica.rss_bytes()
        return metric_sum(scrape(), "process_resident_memory_bytes")

    warmup = args.warmup if args.warmup is not None else 0.2 * args.duration
    stats = Stats()
    m0 = scrape()
    rss_start = rss()
    samples = []  # (t, rss)
    t_start = time.monotonic()
    deadline = t_start + args.duration
    mix = {"normal": 60, "cancel": 15, "deadline": 10, "invalid": 10, "unary": 5}
    gate = Gate(args.clients)
    threads = [threading.Thread(target=worker, daemon=True,
                                args=(stubs, target, deadline, stats, random.Random(args.seed + i),
                                      mix, gate))
               for i in range(args.clients)]

    def idle_rss():
        """RSS with no request in the server: what it keeps, not what the
        canvases in flight happen to need."""
        def quiet():
            m = scrape()
            return metric_sum(m, "dllm_requests_running") + metric_sum(m, "dllm_requests_waiting") == 0
        dllm_ops.wait_for(quiet, 60, "the server to go idle", 0.1)
        time.sleep(1.0)
        return statistics.median(rss() for _ in range(3))

    for t in threads:
        t.start()
    alive, rss_warm = True, None
    while time.monotonic() < deadline:
        time.sleep(1.0)
        samples.append((time.monotonic() - t_start, rss()))
        if replica is not None and replica.proc.poll() is not None:
            alive = False
            break
        if rss_warm is None and time.monotonic() - t_start >= warmup:
            gate.pause(180)
            rss_warm = idle_rss()
            gate.resume()
    for t in threads:
        t.join(timeout=180)
    m1 = scrape() if alive else m0
    rss_end = idle_rss() if alive else 0

    # Drift: idle RSS after warm-up vs idle RSS at the end (both with the
    # clients paused and the server empty). Under load RSS swings with the
    # canvases in flight (tens of % on a tiny model), which says nothing.
    drift = 100.0 * (rss_end - rss_warm) / rss_warm if rss_warm and rss_end else None
    loaded = [r for t, r in samples if t >= warmup]
    b0, b1 = step_buckets(m0), step_buckets(m1)
    delta = [(le, b1.get(le, 0) - b0.get(le, 0)) for le in b1]
    codes = {}
    for kind in stats.by_kind.values():
        for c, k in kind.items():
            codes[c] = codes.get(c, 0) + k
    total = sum(codes.values())
    ms = lambda v: None if v is None else round(v * 1000, 3)  # noqa: E731
    report = {
        "date": datetime.date.today().isoformat(),
        "config": {"clients": args.clients, "duration_s": args.duration, "warmup_s": warmup,
                   "mix_percent": mix, "seed": args.seed, "target": "loopback" if replica else target,
                   "server_args": args.server_args if replica else None,
                   "malloc_arena_max": (args.malloc_arena_max or None) if replica else None,
                   "model": os.path.basename(args.model) if args.model else None,
                   "cpus": os.cpu_count()},
        "requests": {"total": total, "per_second": round(total / args.duration, 2),
                     "by_kind": stats.by_kind, "by_code": codes,
                     "generated_positions_completed": stats.completed_tokens},
        "server_counters": {
            "steps": metric_sum(m1, "dllm_steps_total") - metric_sum(m0, "dllm_steps_total"),
            "requests_total": metric_sum(m1, "dllm_requests_total") - metric_sum(m0, "dllm_requests_total"),
            "cancellations": metric_sum(m1, "dllm_cancellation_latency_seconds_count")
            - metric_sum(m0, "dllm_cancellation_latency_seconds_count")},
        "step_latency_ms": {
            "client_p50": ms(percentile(stats.step_gaps, 50)),
            "client_p99": ms(percentile(stats.step_gaps, 99)),
            "client_samples": len(stats.step_gaps),
            "server_p50": ms(histogram_quantile(0.5, delta)),
            "server_p99": ms(histogram_quantile(0.99, delta))},
        "rss_bytes": {"start": rss_start, "idle_after_warmup": rss_warm, "idle_end": rss_end,
                      "drift_percent": None if drift is None else round(drift, 3),
                      "max_drift_percent": args.max_drift, "drift_slack_mib": args.drift_slack_mib,
                      "under_load_min": min(loaded, default=0), "under_load_max": max(loaded, default=0),
                      "samples": len(samples)},
        "unexpected": stats.unexpected,
        "server_alive": alive,
    }
    # Growth is what a leak looks like; a server that gives memory back
    # (glibc trimming its heap) is fine.
    growth = (rss_end - rss_warm) if rss_warm and rss_end else None
    drift_ok = drift is not None and (drift < args.max_drift
                                      or growth < args.drift_slack_mib * 2**20)
    ok = alive and not stats.unexpected and drift_ok
    report["pass"] = ok
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if replica is not None:
        replica.signal(15)
        try:
            rc = replica.wait_exit(60)
        except Exception:
            rc = None
        if rc != 0:
            print("soak: server exit status %s; log:\n%s" % (rc, replica.read_log()))
            ok = False
        replica.stop()
    if ok:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
