// Offline check of deploy/k8s/*.yaml: every object against the Kubernetes
// 1.27 OpenAPI schema (npm kubernetes-models, the same schemas kubectl
// validates with, compiled to ajv validators), then the cross-object facts a
// schema cannot see (selectors match, probes name the health services,
// the grace period covers the drain). Usage: node validate_k8s.js DIR
// (ctest DeployK8sManifests). Prints one line per object; exit 1 on errors.
"use strict";
const fs = require("fs");
const path = require("path");
const toolsDir = path.join(__dirname, "..", "tools", "node_modules");
const YAML = require(path.join(toolsDir, "yaml"));

const dir = process.argv[2];
const errors = [];
const fail = (where, msg) => errors.push(`${where}: ${msg}`);

function modelFor(apiVersion, kind) {
  // "apps/v1" -> kubernetes-models/apps/v1/Kind; core "v1" -> kubernetes-models/v1/Kind.
  try {
    return require(path.join(toolsDir, "kubernetes-models", apiVersion, kind))[kind];
  } catch (e) {
    return null;
  }
}

const objects = [];
for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort()) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(path.join(dir, file), "utf8"));
  docs.forEach((doc, i) => {
    const where = `${file}#${i}`;
    if (doc.errors.length) return fail(where, `YAML: ${doc.errors[0].message}`);
    const obj = doc.toJS();
    if (!obj) return;
    if (obj.apiVersion && obj.apiVersion.startsWith("kustomize.config.k8s.io/")) {
      for (const r of obj.resources || [])
        if (!fs.existsSync(path.join(dir, r))) fail(where, `kustomization lists missing ${r}`);
      console.log(`${where}: Kustomization (resources exist)`);
      return;
    }
    const Model = modelFor(obj.apiVersion, obj.kind);
    if (!Model) return fail(where, `unknown apiVersion/kind ${obj.apiVersion} ${obj.kind}`);
    try {
      new Model(obj).validate();
      console.log(`${where}: ${obj.apiVersion} ${obj.kind} ${obj.metadata.name}: schema ok`);
    } catch (e) {
      fail(where, `${obj.kind} ${obj.metadata && obj.metadata.name}: ${e.message}`);
    }
    objects.push({ where, obj });
  });
}

// ---- cross-object checks ----
const find = (kind) => objects.filter((o) => o.obj.kind === kind);
const [dep] = find("Deployment");
if (!dep) fail(dir, "no Deployment");
else {
  const spec = dep.obj.spec;
  const labels = spec.template.metadata.labels;
  const matches = (sel) => Object.entries(sel || {}).every(([k, v]) => labels[k] === v);
  if (!matches(spec.selector.matchLabels)) fail(dep.where, "selector does not match the pod labels");
  const portNames = new Set(spec.template.spec.containers.flatMap((k) => (k.ports || []).map((p) => p.name)));
  for (const { where, obj } of find("Service")) {
    if (!matches(obj.spec.selector)) fail(where, "Service selector does not match the pods");
    for (const p of obj.spec.ports)
      if (typeof p.targetPort === "string" && !portNames.has(p.targetPort))
        fail(where, `Service port ${p.name} targets ${p.targetPort}, which no container port is named`);
  }
  for (const { where, obj } of find("PodDisruptionBudget"))
    if (!matches(obj.spec.selector.matchLabels)) fail(where, "PDB selector does not match the pods");
  const headless = find("Service").filter((s) => s.obj.spec.clusterIP === "None");
  if (!headless.length) fail(dep.where, "no headless Service (clusterIP: None)");

  const c = spec.template.spec.containers[0];
  const grpcPort = (c.ports.find((p) => p.name === "grpc") || {}).containerPort;
  const probe = (name, service) => {
    const p = c[name];
    if (!p || !p.grpc) return fail(dep.where, `${name} is not a gRPC probe`);
    if (p.grpc.port !== grpcPort) fail(dep.where, `${name} port ${p.grpc.port} != grpc port ${grpcPort}`);
    if ((p.grpc.service || "") !== service)
      fail(dep.where, `${name} asks service "${p.grpc.service || ""}", expected "${service}"`);
  };
  probe("startupProbe", "dllm.v1.DiffusionLM");
  probe("readinessProbe", "dllm.v1.DiffusionLM");
  probe("livenessProbe", "");

  const arg = (name) => {
    const a = (c.args || []).find((x) => x.startsWith(`--${name}=`));
    return a && a.slice(name.length + 3);
  };
  const drain = Number(arg("drain-seconds") || 30);  // the server's default
  const grace = spec.template.spec.terminationGracePeriodSeconds;
  if (!(grace >= drain + 5)) fail(dep.where, `terminationGracePeriodSeconds ${grace} < --drain-seconds ${drain} + 5`);
  if (!arg("model") || !arg("model").startsWith("/models/")) fail(dep.where, "--model is not under /models");
  const r = c.resources || {};
  if (JSON.stringify(r.requests) !== JSON.stringify(r.limits))
    fail(dep.where, "requests != limits (Guaranteed QoS expected)");
  if (!/^\d+$/.test(String((r.requests || {}).cpu))) fail(dep.where, "CPU request is not a whole number");

  for (const { where, obj } of find("HorizontalPodAutoscaler")) {
    if (obj.spec.scaleTargetRef.name !== dep.obj.metadata.name) fail(where, "HPA targets another Deployment");
    const names = obj.spec.metrics.map((m) => m.pods && m.pods.metric.name);
    if (!names.includes("dllm_requests_waiting")) fail(where, "HPA does not scale on dllm_requests_waiting");
  }
  const adapter = find("ConfigMap").find((o) => o.obj.data && o.obj.data["config.yaml"]);
  if (!adapter) fail(dir, "no prometheus-adapter ConfigMap");
  else {
    const rules = YAML.parse(adapter.obj.data["config.yaml"]).rules || [];
    if (!rules.some((x) => x.name && x.name.as === "dllm_requests_waiting"))
      fail(adapter.where, "adapter exposes no dllm_requests_waiting");
  }
}

for (const e of errors) console.error(`ERROR ${e}`);
console.log(errors.length ? `${errors.length} error(s)` : "all manifests valid");
process.exit(errors.length ? 1 : 0);
