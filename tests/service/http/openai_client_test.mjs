// The official `openai` npm client, unmodified, against a live dllm-server's
// HTTP API: completions and chat, whole and streamed, an aborted stream that
// frees the engine (seen in the metrics), and the API key, right and wrong.
//
//   node openai_client_test.mjs HTTP_PORT METRICS_PORT API_KEY
//
// Run by http_api_test.py, which starts the server. Exit 0 when every check
// passed; each failure is printed.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

// The package is installed under tests/tools (install-node-deps).
const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "..", "tools", "package.json"));
const { default: OpenAI } = await import(require.resolve("openai"));

const [httpPort, metricsPort, apiKey] = process.argv.slice(2);
const baseURL = `http://127.0.0.1:${httpPort}/v1`;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });

async function metric(name, labels = {}) {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name + "{") && !line.startsWith(name + " ")) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) {
      sum += Number(line.trim().split(/\s+/).pop());
    }
  }
  return sum;
}

async function waitFor(predicate, what, seconds = 30) {
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    if (await predicate()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const tests = {
  async modelsList() {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ["tiny-llada-k"]);
  },

  async completionWhole() {
    const r = await client.completions.create({
      model: "tiny-llada-k", prompt: "Hello", max_tokens: 16, seed: 5,
    });
    assert.equal(r.object, "text_completion");
    assert.equal(r.choices.length, 1);
    assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
    assert.equal(typeof r.choices[0].text, "string");
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  },

  async completionStreamEqualsWhole() {
    const body = { model: "tiny-llada-k", prompt: "Once", max_tokens: 24, steps: 12, seed: 8 };
    const whole = await client.completions.create(body);
    const stream = await client.completions.create({ ...body, stream: true });
    let text = "";
    let finish = null;
    for await (const chunk of stream) {
      text += chunk.choices[0].text;
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, whole.choices[0].finish_reason);
  },

  async chatWholeAndStream() {
    const body = {
      model: "tiny-llada-k",
      messages: [{ role: "system", content: "You are terse." }, { role: "user", content: "Hi" }],
      max_tokens: 16, seed: 4,
    };
    const whole = await client.chat.completions.create(body);
    assert.equal(whole.object, "chat.completion");
    assert.equal(whole.choices[0].message.role, "assistant");
    const stream = await client.chat.completions.create({
      ...body, stream: true, stream_options: { include_usage: true },
    });
    let text = "";
    let usage = null;
    let role = null;
    for await (const chunk of stream) {
      assert.equal(chunk.object, "chat.completion.chunk");
      if (chunk.usage) usage = chunk.usage;
      if (chunk.choices.length === 0) continue;
      role = chunk.choices[0].delta.role ?? role;
      text += chunk.choices[0].delta.content ?? "";
    }
    assert.equal(role, "assistant");
    assert.equal(text, whole.choices[0].message.content);
    assert.deepEqual(usage, whole.usage);
  },

  async abortedStreamFreesTheEngine() {
    const cancelled = await metric("dllm_requests_finished_total", { finish_reason: "cancelled" });
    const controller = new AbortController();
    const stream = await client.completions.create(
      { prompt: "x", max_tokens: 256, steps: 256, block_length: 256, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const chunk of stream) {
        if (++chunks === 2) controller.abort();
      }
    } catch (e) {
      assert.ok(e.name === "AbortError" || e instanceof OpenAI.APIUserAbortError, String(e));
    }
    await waitFor(async () =>
      (await metric("dllm_requests_finished_total", { finish_reason: "cancelled" })) === cancelled + 1,
    "the aborted request to be cancelled");
    assert.equal(await metric("dllm_requests_running"), 0);
  },

  async wrongApiKeyIsAuthenticationError() {
    const wrong = new OpenAI({ baseURL, apiKey: "sk-wrong", maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
      assert.equal(e.status, 401);
      assert.equal(e.code, "invalid_api_key");
      return true;
    });
  },

  async badRequestIsBadRequestError() {
    await assert.rejects(
      client.completions.create({ prompt: "x", max_tokens: 16, block_length: 5 }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.equal(e.param, "block_length");
        return true;
      });
  },
};

let failed = 0;
for (const [name, test] of Object.entries(tests)) {
  try {
    await test();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}
process.exit(failed ? 1 : 0);
