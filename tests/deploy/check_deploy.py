#!/usr/bin/python3
"""Static checks of deploy/ that need no server (ctest Deploy*):

  check_deploy.py promtool SRC       alerts + configs + every dashboard and
                                     adapter query through promtool
  check_deploy.py nginx SRC          the nginx template, filled, through nginx -t
  check_deploy.py dockerfile SRC BIN...
                                     the Dockerfile's runtime packages cover
                                     every shared library the binaries load
  check_deploy.py compose SRC        compose.yaml's mounts and ports exist and
                                     agree with the Dockerfile and Prometheus

SRC is the repository root. Exit status 0 = all good; failures are printed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ERRORS = []


def fail(msg):
    ERRORS.append(msg)
    print("ERROR " + msg, file=sys.stderr)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def dashboard_queries(src):
    """(panel title, expr) for every Grafana target, with the dashboard's
    variables replaced by values Prometheus accepts."""
    with open(os.path.join(src, "deploy/grafana/dashboards/dllm.json")) as f:
        dash = json.load(f)
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            expr = t["expr"].replace("$__rate_interval", "1m").replace("$instance", ".*")
            yield panel["title"], expr


def adapter_queries(src):
    with open(os.path.join(src, "deploy/k8s/prometheus-adapter.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        if "config.yaml" in d.get("data", {}):
            for rule in yaml.safe_load(d["data"]["config.yaml"])["rules"]:
                q = (rule["metricsQuery"].replace("<<.Series>>", rule["name"]["as"])
                     .replace("<<.LabelMatchers>>", 'namespace="ns",pod=~"dllm-.*"'))
                yield "adapter " + rule["name"]["as"], q
        if "prometheus.yml" in d.get("data", {}):
            yield "k8s-config", d["data"]["prometheus.yml"]


def check_promtool(src):
    promtool = shutil.which("promtool")
    if not promtool:
        print("promtool not found (Debian package prometheus): skipped")
        sys.exit(77)
    prom = os.path.join(src, "deploy/prometheus")
    for args in (["check", "rules", os.path.join(prom, "alerts.yml")],
                 ["check", "config", os.path.join(prom, "prometheus.yml")]):
        r = run([promtool] + args)
        print(r.stdout.strip())
        if r.returncode:
            fail("promtool %s: %s" % (" ".join(args), r.stderr.strip()))
    # Rule unit tests: the alerts fire on synthetic series (and stay quiet).
    r = run([promtool, "test", "rules", os.path.join(prom, "alerts_test.yml")])
    print(r.stdout.strip())
    if r.returncode:
        fail("promtool test rules: %s %s" % (r.stdout.strip(), r.stderr.strip()))
    # Dashboard and adapter queries: promtool parses PromQL in recording rules.
    with tempfile.TemporaryDirectory() as tmp:
        rules = []
        for i, (title, expr) in enumerate(list(dashboard_queries(src)) + list(adapter_queries(src))):
            if title == "k8s-config":
                path = os.path.join(tmp, "k8s-prometheus.yml")
                with open(path, "w") as f:
                    f.write(expr)
                r = run([promtool, "check", "config", "--syntax-only", path])
                if r.returncode and "kubernetes_sd_configs not found" in r.stdout + r.stderr:
                    # Debian builds Prometheus without Kubernetes discovery:
                    # check everything else (relabeling) with a static target.
                    cfg = yaml.safe_load(expr)
                    for job in cfg["scrape_configs"]:
                        if job.pop("kubernetes_sd_configs", None) is not None:
                            job["static_configs"] = [{"targets": ["127.0.0.1:9464"]}]
                    with open(path, "w") as f:
                        yaml.safe_dump(cfg, f)
                    r = run([promtool, "check", "config", "--syntax-only", path])
                    print("k8s scrape config: checked with a static target "
                          "(this promtool has no Kubernetes discovery)")
                if r.returncode:
                    fail("deploy/k8s/prometheus-adapter.yaml prometheus.yml: " + r.stdout + r.stderr)
                continue
            rules.append({"record": "dllm:query_%d" % i, "expr": expr, "labels": {"panel": title}})
        path = os.path.join(tmp, "queries.yml")
        with open(path, "w") as f:
            yaml.safe_dump({"groups": [{"name": "queries", "rules": rules}]}, f)
        r = run([promtool, "check", "rules", path])
        print("dashboard + adapter queries: " + r.stdout.strip().splitlines()[-1])
        if r.returncode:
            fail("a dashboard or adapter query does not parse: " + r.stdout + r.stderr)


def fill_nginx(src, prefix, listen, a, b, http_listen=0, http_a=0, http_b=0):
    with open(os.path.join(src, "deploy/nginx/dllm.conf")) as f:
        conf = re.sub(r"(?m)^\s*#.*\n", "", f.read())
    conf = (conf.replace("@PREFIX@", prefix).replace("@LISTEN_PORT@", str(listen))
            .replace("@GRPC_PORT_A@", str(a)).replace("@GRPC_PORT_B@", str(b))
            .replace("@HTTP_LISTEN_PORT@", str(http_listen or listen + 10))
            .replace("@HTTP_PORT_A@", str(http_a or a + 10))
            .replace("@HTTP_PORT_B@", str(http_b or b + 10)))
    left = re.findall(r"@[A-Z_]+@", conf)
    if left:
        fail("nginx template has unfilled placeholders " + ", ".join(sorted(set(left))))
    return conf


def check_nginx(src):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        print("nginx not found (Debian package nginx-light): skipped")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(fill_nginx(src, tmp, 18080, 18081, 18082))
        r = run([nginx, "-t", "-p", tmp, "-c", conf, "-e", os.path.join(tmp, "error.log")])
        print(r.stderr.strip())
        if r.returncode:
            fail("nginx -t rejects deploy/nginx/dllm.conf")
    with open(os.path.join(src, "deploy/nginx/dllm.conf")) as f:
        text = re.sub(r"#.*", "", f.read())
    m = re.search(r"grpc_read_timeout\s+(\d+)s", text)
    if not m or int(m.group(1)) <= 10:
        fail("grpc_read_timeout must exceed the 10 s heartbeat ceiling")
    if "http2 on;" in text:
        fail("'http2 on;' needs nginx >= 1.25.1; Debian 12 has 1.22 (use 'listen ... http2;')")


def dockerfile_stages(src):
    with open(os.path.join(src, "deploy/Dockerfile")) as f:
        text = re.sub(r"\\\n", " ", f.read())
    stages, cur = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            cur = {"from": rest.split()[0], "name": rest.split()[-1] if " AS " in rest.upper() else "",
                   "lines": []}
            stages.append(cur)
        elif cur is not None:
            cur["lines"].append((instr, rest.strip()))
    return stages


def package_closure(packages):
    """The packages plus everything they depend on (as installed here)."""
    r = run(["dpkg-query", "-W", "-f=${Package}\t${Depends},${Pre-Depends}\n"])
    deps = {}
    for line in r.stdout.splitlines():
        name, _, rest = line.partition("\t")
        deps[name] = [alt.split("|")[0].strip().split(" ")[0].split(":")[0]
                      for alt in rest.split(",") if alt.strip()]
    seen, todo = set(), list(packages)
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(deps.get(p, []))
    return seen


_OWNERS = None


def owning_package(path):
    """The Debian package that ships `path` (usrmerge-aware), or None."""
    global _OWNERS
    if _OWNERS is None:
        _OWNERS = {}
        lib_dirs = ("/usr/lib/x86_64-linux-gnu/", "/lib/x86_64-linux-gnu/")
        r = run(["dpkg", "-S", "/lib/x86_64-linux-gnu/*.so*", "/usr/lib/x86_64-linux-gnu/*.so*"])
        for line in r.stdout.splitlines():
            pkg, _, files = line.partition(": ")
            for f in files.split(", "):
                for d in lib_dirs:
                    if f.startswith(d):
                        _OWNERS[os.path.basename(f)] = pkg.split(",")[0].strip()
    for p in (path, os.path.realpath(path)):
        if os.path.basename(p) in _OWNERS:
            return _OWNERS[os.path.basename(p)]
    return None


def check_dockerfile(src, binaries):
    stages = dockerfile_stages(src)
    if len(stages) < 2:
        return fail("Dockerfile: expected a multi-stage build")
    build, runtime = stages[0], stages[-1]
    for s in stages:
        if s["from"] != "debian:bookworm-slim":
            fail("Dockerfile: stage FROM %s, expected debian:bookworm-slim" % s["from"])
    runs = " ".join(rest for instr, rest in build["lines"] if instr == "RUN")
    if "scripts/setup-deps" not in runs:
        fail("Dockerfile: the build stage must install through scripts/setup-deps")
    instrs = {}
    for instr, rest in runtime["lines"]:
        instrs.setdefault(instr, []).append(rest)
    user = (instrs.get("USER") or ["root"])[-1].split(":")[0]
    if user in ("root", "0"):
        fail("Dockerfile: the runtime stage runs as root")
    if "50051" not in " ".join(instrs.get("EXPOSE", [])) or "9464" not in " ".join(instrs.get("EXPOSE", [])):
        fail("Dockerfile: EXPOSE 50051 and 9464 expected")
    if "/models" not in " ".join(instrs.get("VOLUME", [])):
        fail("Dockerfile: no /models volume")
    hc = " ".join(instrs.get("HEALTHCHECK", []))
    if "dllm-client" not in hc or "health" not in hc or "dllm.v1.DiffusionLM" not in hc:
        fail("Dockerfile: HEALTHCHECK must run `dllm-client health` on dllm.v1.DiffusionLM")
    # Runtime packages: the apt-get install list of the runtime stage.
    install = " ".join(r for i, r in runtime["lines"] if i == "RUN")
    m = re.search(r"apt-get install ((?:\s*-\S+)*)\s+([^&]+)", install)
    pkgs = m.group(2).split() if m else []
    if not pkgs:
        return fail("Dockerfile: no apt-get install in the runtime stage")
    print("runtime packages: " + " ".join(pkgs))
    for p in pkgs:
        if run(["dpkg-query", "-W", p]).returncode:
            fail("Dockerfile: runtime package %s is not a Debian package installed here" % p)
    # debian:bookworm-slim's own packages (Essential: yes + apt's libs).
    base = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g", "libssl3", "libsystemd0",
            "libzstd1", "liblzma5", "libgcrypt20", "libgpg-error0", "liblz4-1", "libcap2",
            "libcrypt1", "libselinux1", "libpcre2-8-0"}
    have = package_closure(pkgs) | base
    for binary in binaries:
        if not os.path.exists(binary):
            print("%s not built: skipped" % binary)
            continue
        r = run(["ldd", binary])
        before = len(ERRORS)
        for line in r.stdout.splitlines():
            m = re.match(r"\s*(\S+) => (\S+)", line)
            if not m or m.group(2) == "not":
                continue
            if re.match(r"lib(asan|ubsan|tsan|lsan)\.so", m.group(1)):
                continue  # a sanitizer build (scripts/test-sanitizers); images never are
            pkg = owning_package(m.group(2))
            if pkg is None:
                fail("%s: %s belongs to no Debian package" % (binary, m.group(2)))
            elif pkg.split(":")[0] not in have:
                fail("%s needs %s (package %s), missing from the runtime stage"
                     % (os.path.basename(binary), m.group(1), pkg))
        if len(ERRORS) == before:
            print("%s: every ldd dependency is in the runtime stage" % os.path.basename(binary))
    # The binaries the image copies are the ones this build makes.
    for name in ("dllm-server", "dllm-client"):
        if name not in " ".join(r for i, r in build["lines"]):
            fail("Dockerfile: the build stage does not build %s" % name)


def check_compose(src):
    path = os.path.join(src, "deploy/compose.yaml")
    with open(path) as f:
        compose = yaml.safe_load(f)
    services = compose["services"]
    for name in ("dllm", "prometheus", "grafana"):
        if name not in services:
            fail("compose: no %s service" % name)
    deploy = os.path.dirname(path)
    for name, svc in services.items():
        for vol in svc.get("volumes", []):
            host = vol.split(":")[0]
            if host.startswith("./") and not os.path.exists(os.path.join(deploy, host)):
                fail("compose: %s mounts missing %s" % (name, host))
        build = svc.get("build")
        if build and not os.path.exists(os.path.join(deploy, build["context"], build["dockerfile"])):
            fail("compose: %s builds from a missing Dockerfile" % name)
    with open(os.path.join(deploy, "prometheus/prometheus.yml")) as f:
        prom = yaml.safe_load(f)
    targets = [t for job in prom["scrape_configs"] for sc in job.get("static_configs", [])
               for t in sc["targets"]]
    if "dllm:9464" not in targets:
        fail("prometheus.yml does not scrape dllm:9464 (the compose service's metrics port)")
    with open(os.path.join(deploy, "grafana/provisioning/datasources/prometheus.yaml")) as f:
        ds = yaml.safe_load(f)
    if ds["datasources"][0]["url"] != "http://prometheus:9090":
        fail("Grafana data source does not point at the compose prometheus service")
    print("compose.yaml: services, mounts and ports agree")


def main():
    what, src = sys.argv[1], sys.argv[2]
    {"promtool": lambda: check_promtool(src),
     "nginx": lambda: check_nginx(src),
     "dockerfile": lambda: check_dockerfile(src, sys.argv[3:]),
     "compose": lambda: check_compose(src)}[what]()
    print("%d error(s)" % len(ERRORS) if ERRORS else "ok")
    sys.exit(1 if ERRORS else 0)


if __name__ == "__main__":
    main()
