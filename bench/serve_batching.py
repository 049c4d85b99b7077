#!/usr/bin/python3
"""What step-level batching buys a dllm-server under concurrent streams.

For each decoding setting (--caches: exact, and the dual cache) and each
engine mode (--max-batch-requests 1: one request at a time, today's
default before batching; and --batched N), starts dllm-server on loopback,
warms it, and for each --concurrency C runs C Generate streams at once
(one request each, different seeds), through the gRPC API as a client
would. Per run it records:

  aggregate tokens/s   generated positions of all C requests / wall time;
  time per step        gaps between a stream's consecutive step events
                       (DETAIL_STEPS, one event a step), p50 and p99;
  time to first token  the server's Final.timings (arrival to first
                       stable text), p50 and p99;
  time per request     client clock, call start to Final, p50 and p99.

Everything runs in one process on one machine, so the ratios are
same-run ratios. Writes JSON for scripts/render-bench-tables.

  scripts/bench-batching --server build/service/dllm-server --model M.gguf \\
      --label llada-8b-q4_k_m --out bench/results/batching-llada-8b-q4_k_m-CPU-DATE.json
"""
import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "deploy"))
import dllm_ops  # noqa: E402
from dllm_ops import Replica, cpu_model, percentile  # noqa: E402

PROMPTS = ["Tell me about the sea.", "Write a haiku about CPUs.", "What is 2+2?",
           "Explain diffusion language models in one sentence.", "Name three rivers in Europe.",
           "How do bees make honey?", "Describe a sunset over the desert.",
           "Why is the sky blue?"]


def one_stream(stubs, target, request, out, start_barrier):
    stub = stubs.pb_grpc.DiffusionLMStub(stubs.channel(target))
    start_barrier.wait()
    t0 = time.monotonic()
    last, gaps, final = None, [], None
    for r in stub.Generate(request):
        now = time.monotonic()
        kind = r.WhichOneof("event")
        if kind == "step":
            if last is not None:
                gaps.append(now - last)
            last = now
        elif kind == "final":
            final = r.final
    total = time.monotonic() - t0
    out.append({"seconds": total, "step_gaps": gaps,
                "ttft": final.timings.time_to_first_token_seconds if final else None,
                "positions": request.diffusion.gen_length})


def run_concurrency(stubs, target, args, cache, concurrency, seed0):
    results, threads = [], []
    barrier = threading.Barrier(concurrency + 1)
    for i in range(concurrency):
        req = stubs.generate_request(PROMPTS[i % len(PROMPTS)], gen_length=args.gen_length,
                                     steps=args.steps, detail="DETAIL_STEPS", seed=seed0 + i,
                                     block_length=args.block_length,
                                     cache=stubs.pb.Cache.Value(cache))
        t = threading.Thread(target=one_stream, args=(stubs, target, req, results, barrier))
        t.start()
        threads.append(t)
    barrier.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    if len(results) != concurrency:
        raise RuntimeError("%d of %d streams failed" % (concurrency - len(results), concurrency))
    gaps = [g for r in results for g in r["step_gaps"]]
    ttft = [r["ttft"] for r in results if r["ttft"]]
    per_request = [r["seconds"] for r in results]
    return {
        "concurrency": concurrency,
        "wall_seconds": wall,
        "tokens_per_second": sum(r["positions"] for r in results) / wall,
        "step_seconds_p50": percentile(gaps, 50) if gaps else None,
        "step_seconds_p99": percentile(gaps, 99) if gaps else None,
        "ttft_seconds_p50": percentile(ttft, 50) if ttft else None,
        "ttft_seconds_p99": percentile(ttft, 99) if ttft else None,
        "request_seconds_p50": percentile(per_request, 50),
        "request_seconds_p99": percentile(per_request, 99),
    }


def batch_metrics(replica):
    m = replica.metrics()
    count = dllm_ops.metric_sum(m, "dllm_batch_requests_count")
    return {"forwards": count,
            "mean_requests_per_forward":
                dllm_ops.metric_sum(m, "dllm_batch_requests_sum") / count if count else 0,
            "mean_rows_per_forward":
                dllm_ops.metric_sum(m, "dllm_batch_rows_sum") / count if count else 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--label", required=True, help="model name for the table, e.g. llada-8b-q4_k_m")
    ap.add_argument("--concurrency", default="1,2,4,8")
    ap.add_argument("--caches", default="CACHE_NONE,CACHE_DUAL")
    ap.add_argument("--batched", type=int, default=8, help="--max-batch-requests of the batched runs")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    work = tempfile.mkdtemp(prefix="dllm-bench-batching-")
    stubs = dllm_ops.Stubs(src, work)
    runs = []
    try:
        for cache in args.caches.split(","):
            for batch in (1, args.batched):
                name = "b%d-%s" % (batch, cache.lower())
                extra = ["--max-batch-requests", str(batch), "--max-queue", "64"]
                if args.threads:
                    extra += ["--threads", str(args.threads)]
                replica = Replica(name, args.server, args.model, work, extra).start()
                try:
                    replica.wait_ready(stubs, timeout=600)
                    run_concurrency(stubs, replica.target, args, cache, 1, 999)  # warm
                    for c in concurrencies:
                        r = run_concurrency(stubs, replica.target, args, cache, c, 1000 * c)
                        r.update({"cache": cache, "max_batch_requests": batch})
                        runs.append(r)
                        print("%-12s batch %d  concurrency %d: %7.2f tok/s  step p50 %.3f s  "
                              "request p99 %.1f s" % (cache, batch, c, r["tokens_per_second"],
                                                      r["step_seconds_p50"] or 0,
                                                      r["request_seconds_p99"]), flush=True)
                    runs[-1]["engine"] = batch_metrics(replica)
                finally:
                    replica.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = {
        "kind": "batching",
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "model": args.label,
        "settings": {"gen_length": args.gen_length, "steps": args.steps,
                     "block_length": args.block_length, "batched_max_batch_requests": args.batched,
                     "prompts": "one of eight short prompts, seeds differ"},
        "runs": runs,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
