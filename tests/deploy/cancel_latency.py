#!/usr/bin/python3
"""Cancellation latency of dllm-server under load: how long after a client's
cancel (or its deadline passing) the engine stops the request's work.

Starts dllm-server on loopback with --max-running N, keeps --clients streams
of long generations going (more than N, so some wait in the queue), and ends
each one early: half by a client cancel after a random number of events, half
by a random deadline. The server logs, for every request it stops, "stopped
X ms after it" (measured on the engine's clock from the cancel, or from the
deadline itself); this script reads those figures from the server's log and
reports their median, p90, p99 and maximum per --max-running.

  scripts/bench-cancel --server build/service/dllm-server \\
      --model tests/data/models/tiny-llada-k-q4_k_m.gguf --max-running 1,4 \\
      --out bench/results/cancel-latency-tiny-llada-CPU-DATE.json
"""
import argparse
import datetime
import json
import os
import random
import re
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dllm_ops  # noqa: E402
from dllm_ops import Replica, cpu_model, percentile  # noqa: E402

STOPPED = re.compile(r"finish (CANCELLED|DEADLINE_EXCEEDED) \(.*\), stopped ([0-9.]+) ms after it")
PROMPTS = ["Tell me about the sea.", "Write a haiku about CPUs.", "What is 2+2?",
           "Explain diffusion language models in one sentence."]


def client(stubs, target, until, rng, gen_length, max_deadline, counts, lock):
    grpc = stubs.grpc
    channel = stubs.channel(target)
    stub = stubs.pb_grpc.DiffusionLMStub(channel)
    while time.monotonic() < until:
        by_cancel = rng.random() < 0.5
        request = stubs.generate_request(rng.choice(PROMPTS), gen_length=gen_length,
                                         detail="DETAIL_STEPS", seed=rng.randrange(1 << 30))
        timeout = None if by_cancel else rng.uniform(0.05, max_deadline)
        cancel_after = rng.randint(1, 12)
        call = stub.Generate(request, timeout=timeout)
        code = "OK"
        try:
            events = 0
            for _ in call:
                events += 1
                if by_cancel and events >= cancel_after:
                    call.cancel()
        except grpc.RpcError as e:
            code = e.code().name
        with lock:
            counts[code] = counts.get(code, 0) + 1
    channel.close()


def measure(args, stubs, work, max_running):
    name = "cancel-r%d" % max_running
    replica = Replica(name, args.server, args.model, work,
                      ["--max-running", str(max_running), "--max-queue", "64",
                       "--threads", str(args.threads)])
    replica.start()
    try:
        replica.wait_ready(stubs)
        counts, lock = {}, threading.Lock()
        until = time.monotonic() + args.duration
        threads = [threading.Thread(target=client, daemon=True,
                                    args=(stubs, replica.target, until,
                                          random.Random(args.seed * 1000 + i), args.gen_length,
                                          args.max_deadline, counts, lock))
                   for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(args.duration + 120)
    finally:
        replica.stop()
    latencies = {"CANCELLED": [], "DEADLINE_EXCEEDED": []}
    with open(replica.log_path, errors="replace") as f:
        for line in f:
            m = STOPPED.search(line)
            if m:
                latencies[m.group(1)].append(float(m.group(2)))
    every = latencies["CANCELLED"] + latencies["DEADLINE_EXCEEDED"]
    if not every:
        raise RuntimeError("no stopped requests in %s" % replica.log_path)

    def summary(values):
        if not values:
            return {"count": 0}
        return {"count": len(values), "p50_ms": percentile(values, 50),
                "p90_ms": percentile(values, 90), "p99_ms": percentile(values, 99),
                "max_ms": max(values)}
    server_counts = {code: len(v) for code, v in latencies.items()}
    return {"max_running": max_running, "client_outcomes": counts,
            # The server's finish reasons for the stopped requests: they should
            # match the clients' CANCELLED and DEADLINE_EXCEEDED counts.
            "server_outcomes": server_counts,
            "stopped": summary(every), "by_cancel": summary(latencies["CANCELLED"]),
            "by_deadline": summary(latencies["DEADLINE_EXCEEDED"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="dllm-server binary")
    ap.add_argument("--model", required=True, help="GGUF model")
    ap.add_argument("--src", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", ".."))
    ap.add_argument("--max-running", default="1,4", help="comma-separated values to measure")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=float, default=60, help="seconds of load per value")
    ap.add_argument("--gen-length", type=int, default=128)
    ap.add_argument("--max-deadline", type=float, default=3.0,
                    help="deadlines are drawn from [0.05, this] seconds")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="write the JSON report here too")
    args = ap.parse_args()
    if not shutil.which("protoc"):
        print("protoc not found (the script builds its stubs with it)", file=sys.stderr)
        return 1
    work = dllm_ops.tmpdir("dllm-cancel-")
    stubs = dllm_ops.Stubs(os.path.abspath(args.src), work)
    runs = [measure(args, stubs, work, int(n)) for n in args.max_running.split(",")]
    report = {
        "date": datetime.date.today().isoformat(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "config": {"model": os.path.basename(args.model), "clients": args.clients,
                   "duration_s": args.duration, "gen_length": args.gen_length,
                   "max_deadline_s": args.max_deadline, "threads": args.threads,
                   "seed": args.seed,
                   "measure": "engine clock, cancel (or deadline) to the engine stopping "
                              "the request's work, from the server log"},
        "runs": runs,
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
