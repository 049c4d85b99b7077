#!/usr/bin/python3
"""Two dllm-server replicas behind a real nginx (Debian 1.22, unprivileged,
temp prefix) and a real Prometheus, all on loopback (ctest DeployTwoReplicas).

Checks, in order:
  http       the OpenAI HTTP API through nginx: an event stream arrives event
             by event (proxy_buffering off) and ends with [DONE]
  spread     sequential requests through nginx reach both replicas
  cancel     a client cancel through nginx reaches the server (measured:
             dllm_cancellation_latency_seconds and the wall time until the
             server's metrics show it)
  prometheus Prometheus scrapes both replicas; the step-time quantile query
             returns data; every dashboard query runs; alerts.yml loads; every
             dllm_* name the dashboard and alerts use is exported
  sigterm    a replica SIGTERMed mid-stream finishes its in-flight streams and
             exits 0; requests sent while it drains succeed (clients retry
             UNAVAILABLE, as deploy/README.md recommends) and are served by
             the other replica
  sigkill    a SIGKILLed replica loses only its own in-flight streams; the
             other replica's streams finish; new requests succeed through nginx

usage: two_replicas_test.py --server BIN --model GGUF --src REPO [--report FILE]
Exit 0 = pass, 77 = a tool is missing (skipped), 1 = failure.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dllm_ops  # noqa: E402
from dllm_ops import Replica, free_port, metric_sum, wait_for  # noqa: E402

REPORT = {}
FAILURES = []


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg, flush=True)
    if not cond:
        FAILURES.append(msg)


class Nginx:
    def __init__(self, src, work, listen, port_a, port_b, http_listen, http_a, http_b):
        self.prefix = os.path.join(work, "nginx")
        os.makedirs(self.prefix, exist_ok=True)
        # A root-run master hands the workers to `nobody`: let them in.
        os.chmod(work, 0o755)
        os.chmod(self.prefix, 0o777)
        with open(os.path.join(src, "deploy/nginx/dllm.conf")) as f:
            conf = f.read()
        conf = (conf.replace("@PREFIX@", self.prefix).replace("@LISTEN_PORT@", str(listen))
                .replace("@GRPC_PORT_A@", str(port_a)).replace("@GRPC_PORT_B@", str(port_b))
                .replace("@HTTP_LISTEN_PORT@", str(http_listen))
                .replace("@HTTP_PORT_A@", str(http_a)).replace("@HTTP_PORT_B@", str(http_b)))
        self.conf = os.path.join(self.prefix, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.listen, self.http_listen = listen, http_listen
        self.proc = subprocess.Popen(
            [shutil.which("nginx") or "/usr/sbin/nginx", "-p", self.prefix, "-c", self.conf,
             "-e", os.path.join(self.prefix, "error.log"), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    @property
    def target(self):
        return "127.0.0.1:%d" % self.listen

    def access_log(self):
        """[{id, upstream, grpc_status, status}] from the grpc log format."""
        entries = []
        try:
            with open(os.path.join(self.prefix, "grpc_access.log")) as f:
                for line in f:
                    fields = dict(re.findall(r'(\w+)=(\S*)', line))
                    # nginx joins retried upstreams with ", ".
                    ups = re.search(r'upstream=(.*?) grpc_status=', line)
                    fields["upstream"] = ups.group(1) if ups else ""
                    fields["grpc_status"] = fields.get("grpc_status", "").strip("-")
                    status = re.search(r'" (\d{3}) ', line)
                    fields["status"] = status.group(1) if status else ""
                    entries.append(fields)
        except OSError:
            pass
        return entries

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Stream:
    """One Generate stream in a thread; records events and the final code."""

    def __init__(self, stubs, channel, req_id, gen_length, detail="DETAIL_STEPS", timeout=120):
        self.stubs, self.req_id = stubs, req_id
        self.events, self.final, self.code, self.detail_msg = 0, False, None, ""
        self.first_event = threading.Event()
        self.done = threading.Event()
        stub = stubs.pb_grpc.DiffusionLMStub(channel)
        req = stubs.generate_request("Tell me about the sea.", gen_length=gen_length,
                                     request_id=req_id, detail=detail)
        self.call = stub.Generate(req, timeout=timeout, metadata=(("x-request-id", req_id),))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for ev in self.call:
                self.events += 1
                if ev.HasField("step") or ev.HasField("progress"):
                    self.first_event.set()
                if ev.HasField("final"):
                    self.final = True
            self.code = "OK"
        except self.stubs.grpc.RpcError as e:
            self.code, self.detail_msg = e.code().name, e.details()
        finally:
            self.first_event.set()
            self.done.set()

    def wait(self, timeout=180):
        self.done.wait(timeout)
        return self.code


def upstream_of(nginx, req_id, replicas):
    """Which replica served request `req_id` (last attempt in the log)."""
    names = {"127.0.0.1:%d" % r.grpc_port: r.name for r in replicas}
    last = None
    for e in nginx.access_log():
        if e.get("id") == req_id:
            ups = e.get("upstream", "").split(",")[-1].strip()
            last = names.get(ups, ups)
    return last


def generate_once(stubs, channel, req_id, gen_length=16):
    s = Stream(stubs, channel, req_id, gen_length)
    return s.wait(), s


def test_http(nginx):
    """The OpenAI API through nginx: events arrive one by one, not buffered."""
    import http.client
    import json
    conn = http.client.HTTPConnection("127.0.0.1", nginx.http_listen, timeout=60)
    body = json.dumps({"prompt": "Tell me about the sea.", "max_tokens": 64, "steps": 64,
                       "block_length": 64, "stream": True, "dllm_canvas": True})
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    check(resp.status == 200, "nginx passes POST /v1/completions (status %d)" % resp.status)
    arrivals, text = [], b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        arrivals.append(time.monotonic())
        text += chunk
    conn.close()
    check(text.endswith(b"data: [DONE]\n\n"), "the event stream through nginx ends with [DONE]")
    # A reader slower than the engine gets steps merged into one event by
    # design (merged_steps says how many), and the last steps may be merged
    # into the end of the stream: every event must account for the steps
    # since the one before it, in order (a merge counts, a loss does not).
    canvases = []
    for event in text.split(b"\n\n"):
        if event.startswith(b"event: canvas\n"):
            data = event.split(b"\n", 1)[1]
            canvases.append(json.loads(data[len(b"data: "):]))
    previous, gaps = 0, []  # steps count from 1
    for c in canvases:
        if c["step"] - previous != c["merged_steps"]:
            gaps.append((previous, c["step"], c["merged_steps"]))
        previous = c["step"]
    check(len(canvases) > 1 and not gaps and previous <= 64,
          "every step's canvas reaches the client through nginx, merged or not (%d events up to "
          "step %d; unaccounted: %s)" % (len(canvases), previous, gaps))
    check(len(arrivals) > 4, "events reach the client as they are sent, not buffered (%d reads)"
          % len(arrivals))


def test_spread(stubs, nginx, replicas):
    ch = stubs.channel(nginx.target)
    codes = [generate_once(stubs, ch, "spread-%d" % i)[0] for i in range(8)]
    check(all(c == "OK" for c in codes), "spread: 8 requests through nginx all OK (%s)" % codes)
    served = {r.name: metric_sum(r.metrics(), "dllm_requests_total", rpc="Generate") for r in replicas}
    REPORT["spread_requests_per_replica"] = served
    check(all(v >= 2 for v in served.values()),
          "spread: both replicas served requests (server metrics: %s)" % served)
    time.sleep(0.5)  # nginx writes the access log line when the stream ends
    ups = [upstream_of(nginx, "spread-%d" % i, replicas) for i in range(8)]
    check(set(ups) == {r.name for r in replicas}, "spread: nginx log shows both upstreams (%s)" % ups)


def test_cancel(stubs, nginx, replicas):
    ch = stubs.channel(nginx.target)
    before = {r.name: r.metrics() for r in replicas}
    s = Stream(stubs, ch, "cancel-1", gen_length=256)
    s.first_event.wait(30)
    check(s.events > 0 and not s.final, "cancel: the stream is running before the cancel")
    t0 = time.monotonic()
    s.call.cancel()

    def seen():
        for r in replicas:
            m = r.metrics()
            n = metric_sum(m, "dllm_cancellation_latency_seconds_count") - metric_sum(
                before[r.name], "dllm_cancellation_latency_seconds_count")
            if n > 0:
                total = metric_sum(m, "dllm_cancellation_latency_seconds_sum") - metric_sum(
                    before[r.name], "dllm_cancellation_latency_seconds_sum")
                return r.name, total / n
        return None
    try:
        name, server_latency = wait_for(seen, 10, "the server to record the cancellation", 0.01)
        wall = time.monotonic() - t0
        REPORT["cancel_through_nginx"] = {"replica": name, "server_latency_s": server_latency,
                                          "client_to_metrics_wall_s": wall}
        check(True, "cancel: reached %s; server latency %.4f s, %.3f s from cancel() until its "
              "metrics showed it" % (name, server_latency, wall))
    except TimeoutError as e:
        check(False, "cancel: %s" % e)
    s.wait(10)
    check(s.code == "CANCELLED", "cancel: the client sees CANCELLED (%s)" % s.code)


def test_prometheus(stubs, src, work, nginx, replicas):
    prom_bin = shutil.which("prometheus")
    if not prom_bin:
        check(False, "prometheus binary not found (Debian package prometheus)")
        return None
    port = free_port()
    d = os.path.join(work, "prometheus")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(src, "deploy/prometheus/alerts.yml"), d)
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "rule_files: [alerts.yml]\n"
                "scrape_configs:\n"
                "  - job_name: dllm\n"
                "    static_configs:\n"
                "      - targets: [%s]\n" % ", ".join(
                    '"127.0.0.1:%d"' % r.metrics_port for r in replicas))
    proc = subprocess.Popen(
        [prom_bin, "--config.file=" + os.path.join(d, "prometheus.yml"),
         "--storage.tsdb.path=" + os.path.join(d, "data"),
         "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
        stdout=open(os.path.join(d, "prometheus.log"), "w"), stderr=subprocess.STDOUT)

    def api(path, **params):
        url = "http://127.0.0.1:%d/api/v1/%s?%s" % (port, path, urllib.parse.urlencode(params))
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)

    def up():
        try:
            res = api("query", query='up{job="dllm"} == 1')["data"]["result"]
            return len(res) == len(replicas)
        except OSError:
            return False
    try:
        wait_for(up, 60, "Prometheus to scrape both replicas", 0.2)
        check(True, "prometheus: both replicas are up targets")
        ch = stubs.channel(nginx.target)
        for i in range(6):
            generate_once(stubs, ch, "prom-%d" % i, gen_length=32)
        query = ('histogram_quantile(0.5, sum by (le) '
                 '(rate(dllm_step_duration_seconds_bucket[30s])))')

        def has_data():
            res = api("query", query=query)["data"]["result"]
            vals = [float(x["value"][1]) for x in res]
            return vals if vals and all(v == v and v > 0 for v in vals) else None
        try:
            vals = wait_for(has_data, 30, "step-time quantile data", 0.5)
            REPORT["prometheus_step_p50_s"] = vals[0]
            check(True, "prometheus: step-time p50 over both replicas = %.4f s" % vals[0])
        except TimeoutError as e:
            check(False, "prometheus: %s" % e)
        # Every dashboard query runs without error.
        with open(os.path.join(src, "deploy/grafana/dashboards/dllm.json")) as f:
            dash = json.load(f)
        bad = []
        for p in dash["panels"]:
            for t in p["targets"]:
                q = t["expr"].replace("$__rate_interval", "30s").replace("$instance", ".*")
                r = api("query", query=q)
                if r.get("status") != "success":
                    bad.append((p["title"], r))
        check(not bad, "prometheus: every dashboard query evaluates (%s)" % bad)
        rules = api("rules")["data"]["groups"]
        unhealthy = [r["name"] for g in rules for r in g["rules"] if r.get("health") == "err"]
        n = sum(len(g["rules"]) for g in rules)
        check(n > 0 and not unhealthy, "prometheus: alerts.yml loaded, %d rules, none failing %s"
              % (n, unhealthy))
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    # Names used by the dashboard and the alerts exist in a real scrape.
    families = replicas[0].metrics()["__families__"]
    used = set()
    for path in ("deploy/grafana/dashboards/dllm.json", "deploy/prometheus/alerts.yml",
                 "deploy/k8s/prometheus-adapter.yaml", "deploy/k8s/hpa.yaml"):
        with open(os.path.join(src, path)) as f:
            used |= set(re.findall(r"\bdllm_[a-z0-9_]+", f.read()))
    used = {re.sub(r"_(bucket|count|sum)$", "", u) for u in used}
    missing = sorted(u for u in used if u not in families)
    check(not missing, "metrics: every dllm_* name in deploy/ is exported (missing: %s)" % missing)


def test_sigterm(stubs, nginx, replicas, gen_length):
    a, b = replicas
    ch = stubs.channel(nginx.target, retry=True)
    streams = [Stream(stubs, ch, "term-inflight-%d" % i, gen_length) for i in range(4)]
    for s in streams:
        s.first_event.wait(60)
    time.sleep(0.3)
    running_a = metric_sum(a.metrics(), "dllm_requests_running") + metric_sum(
        a.metrics(), "dllm_requests_waiting")
    check(running_a >= 1, "sigterm: replica a has %d stream(s) in flight" % running_a)
    t0 = time.monotonic()
    a.signal(signal.SIGTERM)
    wait_for(lambda: stubs.health(a.target) != "SERVING", 10, "a to turn NOT_SERVING")
    # New requests while a drains: served, by b.
    new_codes = []
    for i in range(4):
        code, _ = generate_once(stubs, ch, "term-new-%d" % i)
        new_codes.append(code)
    codes = [s.wait() for s in streams]
    check(all(c == "OK" for c in codes) and all(s.final for s in streams),
          "sigterm: all 4 in-flight streams finished with a Final (%s)" % codes)
    check(all(c == "OK" for c in new_codes),
          "sigterm: requests sent while a drains all succeed (%s)" % new_codes)
    rc = a.wait_exit(60)
    REPORT["sigterm_drain_s"] = time.monotonic() - t0
    check(rc == 0, "sigterm: a exited with %s after draining (%.2f s)" % (rc, REPORT["sigterm_drain_s"]))
    time.sleep(0.5)
    log = nginx.access_log()
    served_new = [upstream_of(nginx, "term-new-%d" % i, replicas) for i in range(4)]
    rejected = [e for e in log if e.get("id", "").startswith("term-new") and e.get("grpc_status") == "14"]
    REPORT["sigterm_new_requests_retried"] = len(rejected)
    check(all(u == b.name for u in served_new),
          "sigterm: new requests were served by b (%s; %d first tries answered UNAVAILABLE by "
          "draining a and retried)" % (served_new, len(rejected)))
    inflight_ups = [upstream_of(nginx, s.req_id, replicas) for s in streams]
    check(a.name in inflight_ups, "sigterm: some of the drained streams were on a (%s)" % inflight_ups)


def test_sigkill(stubs, nginx, replicas, gen_length):
    a, b = replicas
    ch = stubs.channel(nginx.target, retry=True)
    # Two streams through nginx (least_conn puts one on each replica) and one
    # client connected to a directly; long enough to be running at the kill.
    streams = [Stream(stubs, ch, "kill-inflight-%d" % i, 2 * gen_length) for i in range(2)]
    direct = Stream(stubs, stubs.channel(a.target), "kill-direct", 4 * gen_length)
    for s in streams + [direct]:
        s.first_event.wait(60)
    done_before = {s.req_id for s in streams + [direct] if s.done.is_set()}
    a.signal(signal.SIGKILL)
    a.wait_exit(10)
    codes = {s.req_id: s.wait() for s in streams}
    direct_code = direct.wait()
    if direct.req_id not in done_before:
        check(direct_code == "UNAVAILABLE",
              "sigkill: a client connected to a directly sees UNAVAILABLE (%s)" % direct_code)
    new_codes = [generate_once(stubs, ch, "kill-new-%d" % i)[0] for i in range(4)]
    time.sleep(0.5)
    ups = {s.req_id: upstream_of(nginx, s.req_id, replicas) for s in streams}
    lost = {k: c for k, c in codes.items() if ups[k] == a.name and k not in done_before}
    kept = {k: c for k, c in codes.items() if ups[k] == b.name}
    REPORT["sigkill"] = {"codes": codes, "upstreams": ups, "direct_client_code": direct_code}
    check(bool(lost), "sigkill: some streams were on a when it died (%s)" % ups)
    check(all(c != "OK" for c in lost.values()),
          "sigkill: a's in-flight streams failed (%s)" % lost)
    # Through nginx the code is the one the client library derives from
    # nginx's RST_STREAM: nginx cannot turn a vanished upstream into
    # grpc-status trailers once the response headers went out.
    check(all(c in ("UNAVAILABLE", "INTERNAL") for c in lost.values()),
          "sigkill: through nginx they failed with UNAVAILABLE or INTERNAL (%s)" % lost)
    check(bool(kept) and all(c == "OK" for c in kept.values()),
          "sigkill: b's streams finished OK (%s)" % kept)
    check(all(c == "OK" for c in new_codes), "sigkill: new requests succeed (%s)" % new_codes)
    served_new = [upstream_of(nginx, "kill-new-%d" % i, replicas) for i in range(4)]
    check(all(u == b.name for u in served_new), "sigkill: nginx routed around a (%s)" % served_new)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--report")
    ap.add_argument("--gen-length", type=int, default=128,
                    help="canvas of the long streams (long enough to signal mid-stream)")
    args = ap.parse_args()
    for tool in ("protoc", "prometheus"):
        if not shutil.which(tool):
            print("%s not found: skipped" % tool)
            return 77
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        print("nginx not found: skipped")
        return 77
    if not os.path.exists(args.server):
        print("%s not built: skipped" % args.server)
        return 77
    work = dllm_ops.tmpdir("dllm-two-replicas-")
    stubs = dllm_ops.Stubs(args.src, work)
    server_args = ["--max-running", "2", "--max-queue", "16", "--threads", "1",
                   "--drain-seconds", "120"]
    replicas = [Replica(n, args.server, args.model, work, server_args) for n in ("a", "b")]
    nginx = None
    ok = False
    try:
        for r in replicas:
            r.start()
        for r in replicas:
            r.wait_ready(stubs)
        nginx = Nginx(args.src, work, free_port(), replicas[0].grpc_port, replicas[1].grpc_port,
                      free_port(), replicas[0].http_port, replicas[1].http_port)
        wait_for(lambda: stubs.health(nginx.target) == "SERVING", 20, "nginx to proxy health checks")
        check(True, "nginx proxies grpc.health.v1 to the replicas")
        test_http(nginx)
        test_spread(stubs, nginx, replicas)
        test_cancel(stubs, nginx, replicas)
        test_prometheus(stubs, args.src, work, nginx, replicas)
        test_sigterm(stubs, nginx, replicas, args.gen_length)
        # Bring a back on its old port for the SIGKILL round.
        a = replicas[0]
        a.start(grpc_port=a.grpc_port, metrics_port=a.metrics_port)
        a.wait_ready(stubs)
        time.sleep(11)  # nginx's fail_timeout for a (max_fails=1) runs out
        test_sigkill(stubs, nginx, replicas, args.gen_length)
        ok = not FAILURES
    except Exception as e:  # a crash of the driver is a failure with context
        import traceback
        traceback.print_exc()
        FAILURES.append("driver: %r" % e)
    finally:
        if nginx:
            nginx.stop()
        for r in replicas:
            r.stop()
        if not ok:
            for r in replicas:
                print("---- %s log ----\n%s" % (r.name, r.read_log()))
            if nginx:
                for name in ("error.log", "grpc_access.log"):
                    try:
                        print("---- nginx %s ----\n%s" % (name, open(
                            os.path.join(nginx.prefix, name)).read()[-3000:]))
                    except OSError:
                        pass
        else:
            shutil.rmtree(work, ignore_errors=True)
    REPORT["failures"] = FAILURES
    print(json.dumps(REPORT, indent=1))
    if args.report:
        with open(args.report, "w") as f:
            json.dump(REPORT, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
