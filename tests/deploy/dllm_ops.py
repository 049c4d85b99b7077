"""Shared pieces of the operations tests and the soak tool: gRPC stubs
generated on the fly (dllm.proto + the standard health.proto), dllm-server
replicas as child processes, Prometheus text parsing, free loopback ports.

Uses Debian's python3-grpcio / python3-protobuf and protoc with
grpc_python_plugin (protobuf-compiler, protobuf-compiler-grpc)."""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# grpc.health.v1 (grpc/grpc:src/proto/grpc/health/v1/health.proto), inlined
# so the tests do not need the grpc-proto package at run time.
HEALTH_PROTO = """
syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
}
"""

READY_SERVICE = "dllm.v1.DiffusionLM"


class Stubs:
    """Imports dllm_pb2/_grpc and health_pb2/_grpc generated into a temp dir."""

    def __init__(self, src_dir, work_dir):
        out = os.path.join(work_dir, "pystubs")
        os.makedirs(os.path.join(out, "grpc_health_v1"), exist_ok=True)
        health = os.path.join(out, "grpc_health_v1", "health.proto")
        with open(health, "w") as f:
            f.write(HEALTH_PROTO)
        plugin = "/usr/bin/grpc_python_plugin"
        for proto_path, proto in ((os.path.join(src_dir, "proto"), "dllm/v1/dllm.proto"),
                                  (out, "grpc_health_v1/health.proto")):
            subprocess.run(["protoc", "--proto_path=" + proto_path, "--python_out=" + out,
                            "--grpc_python_out=" + out,
                            "--plugin=protoc-gen-grpc_python=" + plugin, proto], check=True)
        sys.path.insert(0, out)
        import grpc  # noqa: E402  (after the path is set)
        from dllm.v1 import dllm_pb2, dllm_pb2_grpc
        from grpc_health_v1 import health_pb2, health_pb2_grpc
        self.grpc = grpc
        self.pb = dllm_pb2
        self.pb_grpc = dllm_pb2_grpc
        self.health_pb = health_pb2
        self.health_grpc = health_pb2_grpc

    def channel(self, target, retry=False):
        """A channel; retry=True adds the service config a production client
        should use behind a balancer: UNAVAILABLE (draining replica, nothing
        started) is retried with backoff."""
        options = [("grpc.enable_retries", 1)]
        if retry:
            options.append(("grpc.service_config", """{
              "methodConfig": [{
                "name": [{"service": "dllm.v1.DiffusionLM"}],
                "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.05s",
                                "maxBackoff": "1s", "backoffMultiplier": 2,
                                "retryableStatusCodes": ["UNAVAILABLE"]}}]}"""))
        return self.grpc.insecure_channel(target, options=options)

    def health(self, target, service=READY_SERVICE, timeout=2.0):
        """SERVING / NOT_SERVING / ... or the gRPC code name on failure."""
        with self.grpc.insecure_channel(target) as ch:
            stub = self.health_grpc.HealthStub(ch)
            try:
                r = stub.Check(self.health_pb.HealthCheckRequest(service=service), timeout=timeout)
                return self.health_pb.HealthCheckResponse.ServingStatus.Name(r.status)
            except self.grpc.RpcError as e:
                return e.code().name

    def generate_request(self, prompt, gen_length=64, steps=None, detail="DETAIL_STEPS",
                         request_id="", seed=1, early_exit=False, **diffusion):
        pb = self.pb
        return pb.GenerateRequest(
            request_id=request_id,
            prompt=pb.Prompt(text=prompt),
            # steps None: gen_length; 0: unset (a sampler that schedules its
            # own steps, LLaDA2's, refuses the field).
            diffusion=pb.DiffusionParams(gen_length=gen_length,
                                         steps=gen_length if steps is None else steps,
                                         early_exit=early_exit, **diffusion),
            sampling=pb.SamplingParams(temperature=0.0, seed=seed),
            stream=pb.StreamOptions(detail=pb.Detail.Value(detail)))


def cpu_model():
    """The first CPU's model name in /proc/cpuinfo (for result files)."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return ""


def percentile(values, p):
    """Nearest-rank percentile of a non-empty list."""
    values = sorted(values)
    k = max(0, min(len(values) - 1, int(-(-p * len(values) // 100)) - 1))
    return values[k]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("timed out after %.0f s waiting for %s" % (timeout, what))


class Replica:
    """One dllm-server child process on loopback ports."""

    def __init__(self, name, server_bin, model, work_dir, extra_args=()):
        self.name, self.server_bin, self.model = name, server_bin, model
        self.work_dir, self.extra_args = work_dir, list(extra_args)
        self.proc, self.grpc_port, self.metrics_port, self.http_port = None, 0, 0, 0
        self.log_path = os.path.join(work_dir, name + ".log")

    def start(self, grpc_port=0, metrics_port=0):
        port_file = os.path.join(self.work_dir, self.name + ".ports.json")
        if os.path.exists(port_file):
            os.remove(port_file)
        extra = self.extra_args
        # The HTTP API on a free port unless the caller chose one.
        if not any(a.startswith("--http-listen") for a in extra):
            extra = ["--http-listen", "127.0.0.1:0"] + extra
        args = [self.server_bin, "--model", self.model,
                "--listen", "127.0.0.1:%d" % grpc_port,
                "--metrics-listen", "127.0.0.1:%d" % metrics_port,
                "--port-file", port_file] + extra
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        import json

        def ports():
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s during start-up; log:\n%s"
                                   % (self.name, self.proc.returncode, self.read_log()))
            try:
                with open(port_file) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
        p = wait_for(ports, 60, self.name + " port file")
        self.grpc_port, self.metrics_port = p["grpc"], p.get("metrics", 0)
        self.http_port = p.get("http", 0)
        return self

    @property
    def target(self):
        return "127.0.0.1:%d" % self.grpc_port

    def wait_ready(self, stubs, timeout=60):
        wait_for(lambda: stubs.health(self.target) == "SERVING", timeout, self.name + " readiness")

    def metrics_text(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=5) as r:
            return r.read().decode()

    def metrics(self):
        return parse_metrics(self.metrics_text())

    def rss_bytes(self, field="VmRSS"):
        """Resident bytes now, or at the peak so far with field="VmHWM"."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def reset_peak_rss(self):
        """Sets VmHWM back to VmRSS (proc(5): clear_refs, value 5)."""
        with open("/proc/%d/clear_refs" % self.proc.pid, "w") as f:
            f.write("5")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout):
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def read_log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-4000:]
        except OSError:
            return ""


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """{(name, frozenset(labels)): value} plus the family names under
    '__families__'."""
    out, families = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            families.add(line.split()[2])
            continue
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            labels = frozenset(_LABEL.findall(m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    out["__families__"] = families
    return out


def metric_sum(metrics, name, **labels):
    """Sum of every sample of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for k, v in metrics.items()
               if k != "__families__" and k[0] == name and want <= set(k[1]))


def tmpdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)
