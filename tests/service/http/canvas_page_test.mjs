// Browser test of the canvas page served by dllm-server.
//
//   node canvas_page_test.mjs BASE [SCREENSHOT.png] [METRICS_URL]
//
// BASE: the HTTP API, e.g. http://127.0.0.1:8080 (the page is loaded from
// BASE + "/"). METRICS_URL: the Prometheus endpoint (dllm-server serves it on
// --metrics-listen, default http://127.0.0.1:9464/metrics); also env
// METRICS_URL; default BASE + "/metrics". Env: CHROMIUM (the browser, default
// /usr/bin/chromium), PAGE_URL (load the page from elsewhere, e.g. a static
// server with ?api=BASE), DLLM_API_KEY (when the server needs one).
//
// Checks: a run streams more than one canvas event and ends "done"; its
// final text equals the non-streamed completion of the same request; Stop
// cancels a long run ("cancelled") and the engine lets go of it
// (dllm_requests_running back to 0, one more finish_reason="cancelled").
// On a DiffusionGemma server (GET /v1/models says sampler "entropy_bound")
// the page hides the masked samplers' settings, grows the canvas a canvas
// at a time and shows each step's temperature; the same checks hold. On a
// LLaDA2 server (sampler "llada2") it hides Steps, Algorithm and Suffix,
// shows the editing threshold, and under LLaDA2.1's S preset marks the
// cells an edit rewrote.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

// The package is installed under tests/tools (install-node-deps); it drives
// the system's chromium and downloads nothing.
const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "..", "tools", "package.json"));
const { default: puppeteer } = await import(require.resolve("puppeteer-core"));

const BASE = (process.argv[2] || "").replace(/\/+$/, "");
const SHOT = process.argv[3] || "";
const METRICS = process.argv[4] || process.env.METRICS_URL || `${BASE}/metrics`;
const PAGE_URL = process.env.PAGE_URL || `${BASE}/`;
const KEY = process.env.DLLM_API_KEY || "";
// Generous: an instrumented (ASan) server on a busy 2-core machine takes
// tens of seconds for a long canvas's first step.
const TIMEOUT_MS = 400_000;

if (!/^https?:\/\//.test(BASE)) {
  console.error("usage: node canvas_page_test.mjs http://HOST:PORT [screenshot.png] [metrics-url]");
  process.exit(2);
}

class Failure extends Error {}
function check(ok, message) {
  if (!ok) throw new Failure(message);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.log("[canvas-page-test]", ...a);

// One sample of a metric family (summed over its series, filtered by `match`
// on the label text), or null when the family is absent.
async function metric(name, match = "") {
  const res = await fetch(METRICS);
  check(res.ok, `GET ${METRICS} answered ${res.status}; pass the --metrics-listen URL as argv[4]`);
  const text = await res.text();
  let total = null;
  for (const line of text.split("\n")) {
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/);
    if (m && m[1] === name && (m[2] || "").includes(match)) total = (total ?? 0) + Number(m[3]);
  }
  return total;
}

async function setField(page, selector, value) {
  await page.$eval(selector, (el, v) => {
    el.value = v;
    el.dispatchEvent(new Event("input", { bubbles: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
  }, String(value));
}

async function fillForm(page, { prompt, maxTokens, steps, suffix = "" }) {
  await setField(page, "#prompt", prompt);
  await setField(page, "#suffix", suffix);
  await setField(page, "#max-tokens", maxTokens);
  await setField(page, "#steps", steps);
  await setField(page, "#threshold", "");
  await setField(page, "#cache", "none");
  await setField(page, "#temperature", 0);
  await setField(page, "#seed", 0);
  await setField(page, "#eb-max-steps", "");
}

const text = (page, sel) => page.$eval(sel, (el) => el.textContent);

async function waitStatus(page, want, timeout) {
  try {
    await page.waitForFunction(
      (w) => {
        const s = document.querySelector("#status").textContent;
        return s === w || s.startsWith("error");
      },
      { timeout, polling: 50 }, want);
  } catch {
    throw new Failure(`#status did not become '${want}' within ${timeout} ms (it is '${await text(page, "#status")}')`);
  }
  const status = await text(page, "#status");
  check(status === want, `#status is '${status}', expected '${want}'`);
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--headless=new"],
    defaultViewport: { width: 1100, height: 760 },
  });
  try {
    const page = await browser.newPage();
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    if (KEY) await page.evaluateOnNewDocument((k) => localStorage.setItem("dllm.apiKey", k), KEY);
    const loaded = await page.goto(PAGE_URL, { waitUntil: "load" });
    check(loaded && loaded.ok(), `GET ${PAGE_URL} answered ${loaded && loaded.status()}`);
    check((await text(page, "#status")) === "idle", "#status is not 'idle' after load");

    const headers = { "Content-Type": "application/json" };
    if (KEY) headers.Authorization = `Bearer ${KEY}`;
    const models = await (await fetch(`${BASE}/v1/models`, { headers })).json();
    const info = models.data[0].dllm || {};
    const eb = info.sampler === "entropy_bound";
    // On a LLaDA2 server: no Steps, Algorithm or Suffix; an editing threshold.
    const l2 = info.sampler === "llada2";
    if (l2) {
      await page.waitForFunction(() => document.body.classList.contains("llada2"),
                                 { timeout: 10_000 });
      const shown = (sel) => page.$eval(sel, (el) => el.offsetParent !== null);
      check(!(await shown("#steps")), "the Steps field shows on a LLaDA2 server");
      check(!(await shown("#suffix")), "the Suffix field shows on a LLaDA2 server");
      check(await shown("#editing-threshold"), "no Editing threshold field on a LLaDA2 server");
      log(`LLaDA2 server: block length ${info.block_length}`);
    }
    if (eb) {
      await page.waitForFunction(() => document.body.classList.contains("entropy-bound"),
                                 { timeout: 10_000 });
      const stepsShown = await page.$eval("#steps", (el) => el.offsetParent !== null);
      check(!stepsShown, "the Steps field shows on an entropy-bound server");
      log(`entropy-bound server: canvas length ${info.canvas_length}`);
    }

    // 1. A short run: canvas events, then "done".
    const prompt = "def fibonacci(n):";
    await fillForm(page, { prompt, maxTokens: 32, steps: 32 });
    if (eb) await setField(page, "#cache", "exact");
    if (l2) {
      // LLaDA2.1's S preset: edits rewrite written cells.
      await setField(page, "#cache", "exact");
      await setField(page, "#threshold", 0.5);
      await setField(page, "#editing-threshold", 0);
    }
    await page.click("#run");
    await waitStatus(page, "done", 180_000);
    const events = Number(await text(page, "#step-count"));
    // The tiny LLaDA2 file runs a step in well under a millisecond: the
    // server merges the steps a slow reader has not taken yet, so one event
    // may carry them all (their edits included).
    check(events > (l2 ? 0 : 1), `#step-count is ${events}: the canvas was drawn too rarely`);
    const finalText = await text(page, "#final-text");
    const cells = await page.$$eval("#canvas .cell", (els) => els.length);
    const masked = await page.$$eval("#canvas .cell.masked", (els) => els.length);
    if (eb) {
      const c = info.canvas_length;
      check(cells > 0 && cells % c === 0 && cells <= Math.ceil(32 / c) * c,
            `the canvas has ${cells} cells, not whole canvases of ${c} up to 32 tokens`);
      const shown = await text(page, "#masked");
      check(/^canvas \d+, T \d/.test(shown), `the progress shows '${shown}', not the canvas step`);
    } else if (l2) {
      // Blocks count from position 0: the canvas runs to the last block's end.
      check(cells >= 32 && cells < 32 + info.block_length,
            `the canvas has ${cells} cells, not 32 up to a block's end`);
      const edited = await page.$$eval("#canvas .cell.edited", (els) => els.length);
      check(edited > 0, "no cell was marked edited under LLaDA2.1's S preset");
      log(`LLaDA2: ${edited} edited cells, progress '${await text(page, "#masked")}'`);
    } else {
      check(cells === 32, `the canvas has ${cells} cells, expected 32`);
    }
    check(masked === 0, `${masked} cells are still masked after the run`);
    log(`run 1: ${events} canvas events, final text ${JSON.stringify(finalText)}`);

    // 2. The same request through the API, not streamed: the same text.
    const same = eb ? { prompt, max_tokens: 32, cache: "exact", seed: 0 }
               : l2 ? { prompt, max_tokens: 32, cache: "exact", threshold: 0.5,
                        editing_threshold: 0, temperature: 0, seed: 0 }
                    : { prompt, max_tokens: 32, steps: 32, cache: "none", temperature: 0, seed: 0 };
    const res = await fetch(`${BASE}/v1/completions`, {
      method: "POST", headers, body: JSON.stringify(same),
    });
    const whole = await res.json();
    check(res.ok, `POST /v1/completions answered ${res.status}: ${JSON.stringify(whole)}`);
    const apiText = whole.choices[0].text;
    check(apiText === finalText,
          `#final-text ${JSON.stringify(finalText)} != the API's text ${JSON.stringify(apiText)}`);
    log("run 1's text equals the non-streamed completion");

    // 3. A long run, stopped after its first canvas event. (The tiny LLaDA2
    // file finishes a whole context in milliseconds, before any Stop: the
    // other servers' runs check it.)
    if (l2) {
      check(pageErrors.length === 0, `page errors: ${pageErrors.join("; ")}`);
      return;
    }
    const cancelledBefore = (await metric("dllm_requests_finished_total", 'finish_reason="cancelled"')) ?? 0;
    check((await metric("dllm_requests_running")) !== null, "no dllm_requests_running in the metrics");
    // An infill run: the span between the prompt and a suffix.
    // (The entropy-bound sampler takes no suffix: a canvas of many steps
    // instead; the random test file never grows confident enough to stop.)
    await fillForm(page, { prompt, maxTokens: 256, steps: 256,
                           suffix: eb || l2 ? "" : "\n\n\nif __name__ == \"__main__\":\n    print(fibonacci(10))\n" });
    if (eb) await setField(page, "#eb-max-steps", 100000);
    await page.click("#run");
    // With a screenshot to take, mid-run: the canvas partly filled.
    const shotAt = SHOT ? 90 : 1;
    await page.waitForFunction((n) => Number(document.querySelector("#step-count").textContent) >= n ||
                                      document.querySelector("#status").textContent !== "running",
                               { timeout: 180_000, polling: 10 }, shotAt);
    if (SHOT) {
      await page.screenshot({ path: SHOT, fullPage: false });
      log(`screenshot: ${SHOT}`);
    }
    check((await text(page, "#status")) === "running",
          `the long run ended before it could be stopped: #status '${await text(page, "#status")}'`);
    log(`run 2: ${await text(page, "#step-count")} canvas event(s); requests running: ${await metric("dllm_requests_running")}`);
    await page.click("#stop");
    await waitStatus(page, "cancelled", 10_000);
    const stoppedAt = Date.now();
    let running = null;
    let cancelled = cancelledBefore;
    while (Date.now() - stoppedAt < 20_000) {
      running = await metric("dllm_requests_running");
      cancelled = (await metric("dllm_requests_finished_total", 'finish_reason="cancelled"')) ?? 0;
      if (running === 0 && cancelled > cancelledBefore) break;
      await sleep(50);
    }
    check(running === 0, `dllm_requests_running is still ${running} 20 s after Stop`);
    check(cancelled > cancelledBefore,
          `dllm_requests_finished_total{finish_reason="cancelled"} stayed at ${cancelledBefore}: the run was not cancelled`);
    log(`Stop freed the engine in ${Date.now() - stoppedAt} ms (running 0, cancelled ${cancelledBefore} -> ${cancelled})`);
    check(pageErrors.length === 0, `page errors: ${pageErrors.join("; ")}`);
  } finally {
    await browser.close();
  }
}

const timer = setTimeout(() => {
  console.error(`[canvas-page-test] FAIL: timed out after ${TIMEOUT_MS / 1000} s`);
  process.exit(3);
}, TIMEOUT_MS);
timer.unref();

try {
  await main();
  log("PASS");
  process.exit(0);
} catch (e) {
  console.error(`[canvas-page-test] FAIL: ${e instanceof Failure ? e.message : e.stack || e}`);
  process.exit(1);
}
