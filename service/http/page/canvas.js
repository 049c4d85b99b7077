// dllm canvas page: runs POST /v1/completions with stream + dllm_canvas and
// draws each step's canvas from the `event: canvas` SSE events.
// The API base is this page's origin, or ?api=http://host:port.
"use strict";

const $ = (id) => document.getElementById(id);
const API = (new URLSearchParams(location.search).get("api") || "").replace(/\/+$/, "");
const KEY_STORE = "dllm.apiKey";
const MASK_GLYPH = "░";

let controller = null;  // the running request's AbortController
let run = null;         // the running request's state
// The served model's sampler (GET /v1/models): "masked", "entropy_bound"
// (DiffusionGemma: every step rewrites the canvas; no steps, algorithm,
// threshold, temperature or suffix to choose) or "llada2" (blocks it
// schedules itself: no steps, algorithm or suffix; a threshold, and
// LLaDA2.1's editing threshold, whose edits rewrite written cells).
let sampler = "masked";

function setStatus(text) {
  $("status").textContent = text;
  $("status").classList.toggle("error", text.startsWith("error"));
}

function setRunning(on) {
  $("run").disabled = on;
  $("stop").disabled = !on;
}

// The request body from the form; blank optional fields are left out.
function readForm() {
  const num = (id) => {
    const v = $(id).value.trim();
    return v === "" ? undefined : Number(v);
  };
  const llada2 = sampler === "llada2";
  const masked = sampler === "masked" || llada2;
  const body = {
    prompt: $("prompt").value,
    max_tokens: num("max-tokens"),
    steps: masked && !llada2 ? num("steps") : undefined,
    threshold: masked ? num("threshold") : undefined,
    editing_threshold: llada2 ? num("editing-threshold") : undefined,
    algorithm: (masked && !llada2 && $("algorithm").value) || undefined,
    cache: $("cache").value,
    temperature: masked ? num("temperature") : undefined,
    seed: num("seed"),
    eb_max_steps: masked ? undefined : num("eb-max-steps"),
    stream: true,
    dllm_canvas: true,
  };
  const suffix = $("suffix").value;
  if (masked && !llada2 && suffix !== "") body.suffix = suffix;
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  return body;
}

// ---- the canvas ----

// A token's text, with a dim ↵ before each newline so that line breaks show.
function cellText(el, text) {
  el.replaceChildren();
  text.split("\n").forEach((part, i) => {
    if (i > 0) {
      const mark = document.createElement("span");
      mark.className = "nl";
      mark.textContent = "↵";
      el.append(mark, "\n");
    }
    if (part) el.append(part);
  });
}

function drawSkeleton(prompt, length, suffix) {
  const canvas = $("canvas");
  canvas.replaceChildren();
  const p = document.createElement("span");
  p.className = "prompt";
  p.textContent = prompt;
  canvas.append(p);
  run.cells = [];
  for (let i = 0; i < length; i++) {
    const c = document.createElement("span");
    c.className = "cell masked";
    c.textContent = MASK_GLYPH;
    run.cells.push(c);
  }
  canvas.append(...run.cells);
  if (suffix) {
    const s = document.createElement("span");
    s.className = "suffix";
    s.textContent = suffix;
    canvas.append(s);
  }
}

function onCanvas(ev) {
  const now = performance.now();
  run.events += 1;
  $("step-count").textContent = String(run.events);
  if (ev.canvas.length !== run.cells.length) drawSkeleton(run.prompt, ev.canvas.length, run.suffix);

  for (const c of run.fresh) c.classList.remove("new");
  run.fresh = [];
  for (const t of ev.committed) {
    run.texts.set(t.position, t.text);
    const c = run.cells[t.position];
    if (!c) continue;
    cellText(c, t.text);
    c.classList.remove("masked");
    // An edit (LLaDA2.1) rewrote a written token: it stays marked.
    if (t.replaced !== undefined) {
      c.classList.add("edited");
      c.title = `edited: was token ${t.replaced}`;
      run.edits += 1;
    }
    c.classList.add("new");
    run.fresh.push(c);
  }
  if (ev.canvas_step) {
    // Entropy-bound: the step rewrote its canvas; a cell whose token is not
    // the canvas's argmax was renoised (drawn at random), shown as noise.
    const step = ev.canvas_step;
    const first = ev.canvas.length - step.argmax.length;
    step.argmax.forEach((id, i) => {
      const c = run.cells[first + i];
      if (c) c.classList.toggle("noise", ev.canvas[first + i] !== id);
    });
    for (let i = 0; i < first; i++) run.cells[i].classList.remove("noise", "new");
    $("masked").textContent =
      `canvas ${step.canvas + 1}, T ${step.temperature.toFixed(2)}, ` +
      `${step.accepted} accepted, H ${step.mean_entropy.toFixed(3)}`;
  }
  const masked = new Set(ev.masked);
  ev.canvas.forEach((id, i) => {
    const c = run.cells[i];
    if (masked.has(i)) {
      if (!c.classList.contains("masked")) {  // remasked
        c.className = "cell masked";
        c.textContent = MASK_GLYPH;
      }
    } else if (c.classList.contains("masked")) {  // committed without a text: show its id
      c.classList.remove("masked");
      cellText(c, run.texts.get(i) ?? `⟨${id}⟩`);
    }
  });

  // Client-side timing: the time since the previous event, over the steps it covers.
  const dt = (now - run.lastAt) / 1000;
  const merged = Math.max(1, ev.merged_steps || 1);
  run.lastAt = now;
  run.committed += ev.committed.length;
  // planned_steps is 0 when a threshold makes the count unknown in advance.
  $("step").textContent = ev.planned_steps ? `${ev.step} / ${ev.planned_steps}` : String(ev.step);
  if (!ev.canvas_step) {
    $("masked").textContent =
        String(ev.masked_remaining) + (run.edits > 0 ? ` (${run.edits} edits)` : "");
  }
  const elapsed = (now - run.startAt) / 1000;
  $("step-ms").textContent =
    `${((dt * 1000) / merged).toFixed(1)} ms (mean ${((elapsed * 1000) / ev.step).toFixed(1)} ms)`;
  $("elapsed").textContent = `${elapsed.toFixed(2)} s`;
  $("tps").textContent = `${(run.committed / elapsed).toFixed(1)} (step ${(ev.committed.length / Math.max(dt, 1e-6)).toFixed(0)})`;
}

function onChunk(chunk) {
  if (chunk.error) throw new Error(chunk.error.message || "the stream reported an error");
  const choice = chunk.choices && chunk.choices[0];
  if (choice && typeof choice.text === "string" && choice.text !== "") {
    run.text += choice.text;
    $("final-text").textContent = run.text;
  }
  if (chunk.dllm) {
    const d = chunk.dllm;
    const n = (d.token_ids || []).length;
    const tps = d.total_seconds > 0 ? (n / d.total_seconds).toFixed(1) : "–";
    $("server-stats").textContent =
      `${n} tokens · ${d.steps} steps · ${d.forward_passes} forwards · ` +
      `${d.total_seconds.toFixed(3)} s (queue ${d.queue_seconds.toFixed(3)} s) · ${tps} tok/s` +
      (choice && choice.finish_reason ? ` · ${choice.finish_reason}` : "");
    $("tps").textContent = `${tps} (server)`;
    if (d.steps > 0) $("step-ms").textContent = `${((d.total_seconds * 1000) / d.steps).toFixed(1)} ms (server mean)`;
  }
}

// ---- SSE over fetch (EventSource cannot POST) ----

// Calls onEvent(name, data) for each event; returns when the stream ends.
async function readSse(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;  // comments: pings
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") name = val;
        else if (field === "data") data.push(val);
      }
      if (data.length) onEvent(name, data.join("\n"));
    }
  }
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

function askForKey(message) {
  const box = $("key-box");
  box.open = true;
  box.classList.add("needed");
  $("key-note").textContent = `${message} Enter the server's API key and run again.`;
  $("api-key").focus();
}

async function start() {
  if (controller) return;
  const body = readForm();
  run = {
    prompt: body.prompt, suffix: body.suffix || "", cells: [], fresh: [], texts: new Map(),
    events: 0, committed: 0, edits: 0, text: "", finished: false,
    startAt: performance.now(), lastAt: performance.now(),
  };
  for (const id of ["step", "masked", "step-ms", "tps", "elapsed"]) $(id).textContent = "–";
  $("step-count").textContent = "0";
  $("final-text").textContent = "";
  $("server-stats").textContent = "";
  // The entropy-bound canvas grows a canvas at a time: drawn as events come.
  drawSkeleton(body.prompt, sampler !== "entropy_bound" ? body.max_tokens || 0 : 0, run.suffix);

  controller = new AbortController();
  setRunning(true);
  setStatus("running");
  try {
    const response = await fetch(`${API}/v1/completions`, {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (!response.ok) {
      let message = `HTTP ${response.status}`;
      try { message = (await response.json()).error.message || message; } catch { /* not JSON */ }
      if (response.status === 401) askForKey(message);
      throw new Error(message);
    }
    await readSse(response, (name, data) => {
      if (name === "canvas") return onCanvas(JSON.parse(data));
      if (data === "[DONE]") { run.finished = true; return; }
      onChunk(JSON.parse(data));
    });
    if (!run.finished) throw new Error("the stream ended before [DONE]");
    for (const c of run.fresh) c.classList.remove("new");
    $("elapsed").textContent = `${((performance.now() - run.startAt) / 1000).toFixed(2)} s`;
    setStatus("done");
  } catch (err) {
    if (controller.signal.aborted) setStatus("cancelled");
    else setStatus(`error: ${err.message}`);
  } finally {
    controller = null;
    setRunning(false);
  }
}

function stop() {
  if (controller) controller.abort();  // closes the connection: the server cancels the request
}

// Asks the server which sampler its model runs and shows the settings that
// apply to it. Without an answer (no key yet, an older server) the form
// stays as it is.
async function loadModel() {
  try {
    const response = await fetch(`${API}/v1/models`, { headers: headers() });
    if (!response.ok) return;
    const model = (await response.json()).data[0];
    sampler = (model.dllm && model.dllm.sampler) || "masked";
  } catch { return; }
  const eb = sampler === "entropy_bound";
  const llada2 = sampler === "llada2";
  document.body.classList.toggle("entropy-bound", eb);
  document.body.classList.toggle("llada2", llada2);
  // LLaDA2's threshold is on by default (0.95): blank keeps the server's.
  if (llada2) $("threshold").placeholder = "0.95";
  const caches = eb || llada2 ? ["exact", "none"] : ["none", "prefix", "dual"];
  $("cache").replaceChildren(...caches.map((v) => {
    const o = document.createElement("option");
    o.value = o.textContent = v;
    return o;
  }));
  $("masked-label").textContent = eb ? "canvas" : "masked";
}

document.addEventListener("DOMContentLoaded", () => {
  const key = localStorage.getItem(KEY_STORE);
  if (key) $("api-key").value = key;
  $("api-key").addEventListener("change", () => {
    const v = $("api-key").value.trim();
    if (v) localStorage.setItem(KEY_STORE, v);
    else localStorage.removeItem(KEY_STORE);
    $("key-box").classList.remove("needed");
  });
  $("form").addEventListener("submit", (e) => { e.preventDefault(); start(); });
  $("stop").addEventListener("click", stop);
  $("form").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); $("form").requestSubmit(); }
  });
  loadModel().then(() => setStatus("idle"));
});
