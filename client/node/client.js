#!/usr/bin/env node
// A Node example client of dllm-server: a streamed generation, and model and
// server information. Loads proto/dllm/v1/dllm.proto at run time with
// @grpc/proto-loader (no generated code); install its packages with
// `npm ci` in this folder (tests/tools/install-node-deps does it).
//
//   node client/node/client.js generate --target 127.0.0.1:50051 "Hello"
//   node client/node/client.js --json info
//
// Flags go before or after the command (the convention of all three
// clients); usage errors print "client.js: what is wrong" and the usage and
// exit 2; failures print "error: CODE: message" and exit 1.
'use strict';
const path = require('path');

// The gRPC packages, or a clear message (not a stack trace) when they are not
// installed.
function requirePackage(name) {
  try {
    return require(name);
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    console.error(`error: the Node package ${name} is not installed; run \`npm ci\` in ${__dirname}`);
    process.exit(1);
  }
}
let grpc;
let protoLoader;

const PROTO = path.join(__dirname, '..', '..', 'proto', 'dllm', 'v1', 'dllm.proto');
const PROG = 'client.js';
const USAGE = `usage: ${PROG} COMMAND [flags] [PROMPT]
commands: generate PROMPT | info
flags: --target HOST:PORT (default 127.0.0.1:50051) --timeout-seconds S --json
generate: --gen-length N --steps N --temperature T --seed S --chat
`;

class UsageError extends Error {}

function wholeNumber(name, text, limit = 2n ** 32n - 1n) {
  if (!/^[0-9]+$/.test(text) || BigInt(text) > limit) {
    throw new UsageError(`--${name}: '${text}' is not a whole number in [0, ${limit}]`);
  }
  return text;  // kept as a string: proto-loader takes 64-bit values as strings
}
const seedNumber = (name, text) => wholeNumber(name, text, 2n ** 64n - 1n);

function finiteNumber(name, text, min, inclusive) {
  const value = /^[-+]?[0-9.eE+-]+$/.test(text) ? Number(text) : NaN;
  if (!Number.isFinite(value) || value < min || (!inclusive && value === min)) {
    throw new UsageError(`--${name}: '${text}' is not a finite number ${inclusive ? '>=' : '>'} ${min}`);
  }
  return value;
}
const positiveSeconds = (name, text) => finiteNumber(name, text, 0, false);
const nonNegative = (name, text) => finiteNumber(name, text, 0, true);
const textValue = (name, text) => text;

// name -> [attribute, parser (null for a boolean flag), default]
const FLAGS = {
  'target': ['target', textValue, '127.0.0.1:50051'],
  'timeout-seconds': ['timeout', positiveSeconds, 0],
  'json': ['json', null, false],
  'gen-length': ['genLength', wholeNumber, 0],
  'steps': ['steps', wholeNumber, 0],
  'temperature': ['temperature', nonNegative, 0],
  'seed': ['seed', seedNumber, null],
  'chat': ['chat', null, false],
  'help': ['help', null, false],
};
const GENERATE_ONLY = ['gen-length', 'steps', 'temperature', 'seed', 'chat'];

// The convention of all three clients: flags before or after the command,
// `--name value` or `--name=value`, `--` ends the flags.
function parseArgs(argv) {
  const args = {};
  for (const [attr, , fallback] of Object.values(FLAGS)) args[attr] = fallback;
  const given = new Set();
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (a === '-h' || a === '--help') {
      args.help = true;
      continue;
    }
    if (!a.startsWith('--') || a.length < 3) {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
    if (!(name in FLAGS)) throw new UsageError(`unknown flag --${name}`);
    const [attr, parse] = FLAGS[name];
    if (parse === null) {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      args[attr] = true;
    } else {
      let value;
      if (eq >= 0) {
        value = a.slice(eq + 1);
      } else {
        if (i + 1 >= argv.length) throw new UsageError(`--${name} needs a value`);
        value = argv[++i];
      }
      args[attr] = parse(name, value);
    }
    given.add(name);
  }
  if (args.help) return args;
  if (positional.length === 0) throw new UsageError('no command given');
  [args.command, ...args.rest] = positional;
  if (args.command === 'generate') {
    if (args.rest.length !== 1) throw new UsageError('generate: expected one PROMPT argument (quote it)');
  } else if (args.command === 'info') {
    if (args.rest.length > 0) throw new UsageError(`info: unexpected argument '${args.rest[0]}'`);
    const misplaced = GENERATE_ONLY.filter((n) => given.has(n));
    if (misplaced.length > 0) throw new UsageError(`info: --${misplaced[0]} is a generate flag`);
  } else {
    throw new UsageError(`unknown command '${args.command}'`);
  }
  return args;
}

function fail(err) {
  const code = err.code !== undefined ? grpc.status[err.code] : 'UNKNOWN';
  console.error(`error: ${code}: ${err.details || err.message}`);
  process.exit(1);
}

function callOptions(args) {
  return args.timeout > 0 ? { deadline: new Date(Date.now() + args.timeout * 1000) } : {};
}

function generate(client, args, prompt) {
  const request = {
    prompt: { text: prompt, apply_chat_template: args.chat },
    diffusion: { gen_length: Number(args.genLength), steps: Number(args.steps) },
    sampling: Object.assign({ temperature: args.temperature },
                            args.seed === null ? {} : { seed: args.seed }),
    stream: { detail: 'DETAIL_TEXT' },
  };
  const call = client.Generate(request, callOptions(args));
  let streamed = '';
  let final = null;
  let requestId = '';
  call.on('data', (event) => {
    requestId = event.request_id;
    if (event.event === 'step') {
      streamed += event.step.text_delta;
      if (!args.json) process.stdout.write(event.step.text_delta);
    } else if (event.event === 'final') {
      final = event.final;
    }
  });
  call.on('error', fail);
  call.on('end', () => {
    if (final === null) fail(new Error('the stream ended without a Final event'));
    const reason = final.finish_reason.replace('FINISH_REASON_', '');
    if (args.json) {
      console.log(JSON.stringify({ request_id: requestId, streamed_text: streamed, text: final.text,
                                   finish_reason: reason, generated_tokens: final.usage.generated_tokens,
                                   steps: final.usage.steps, seed: final.seed }));
    } else {
      process.stdout.write('\n');
      console.error(`finish: ${reason}, ${final.usage.generated_tokens} tokens, ` +
                    `${final.usage.steps} steps, seed ${final.seed}`);
    }
  });
}

function info(client, args) {
  client.GetModelInfo({}, callOptions(args), (err, model) => {
    if (err) fail(err);
    client.GetServerInfo({}, callOptions(args), (err2, server) => {
      if (err2) fail(err2);
      if (args.json) {
        console.log(JSON.stringify({
          model: { name: model.name, architecture: model.architecture, vocab_size: model.vocab_size,
                   mask_token_id: model.mask_token_id },
          server: { version: server.version, isa: server.isa, max_running: server.max_running },
        }));
      } else {
        console.log(`model: ${model.name} (${model.architecture}, ${model.n_layer} layers, ` +
                    `vocab ${model.vocab_size}, ${model.weight_format})`);
        console.log(`server: dllm ${server.version}, isa ${server.isa}, ` +
                    `${server.requests_running}/${server.max_running} running`);
      }
    });
  });
}

function main() {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`${PROG}: ${e.message}\n${USAGE}`);
    process.exit(2);
  }
  if (args.help) {
    process.stdout.write(USAGE);
    return;
  }
  grpc = requirePackage('@grpc/grpc-js');
  protoLoader = requirePackage('@grpc/proto-loader');
  const definition = protoLoader.loadSync(PROTO, {
    keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
  });
  const dllm = grpc.loadPackageDefinition(definition).dllm.v1;
  const client = new dllm.DiffusionLM(args.target, grpc.credentials.createInsecure());
  if (args.command === 'generate') generate(client, args, args.rest[0]);
  else info(client, args);
}

main();
