#!/usr/bin/env node
// A Node example client of dllm-server: a streamed generation, and model and
// server information. Loads proto/dllm/v1/dllm.proto at run time with
// @grpc/proto-loader (no generated code); install its packages with
// `npm ci` in this folder (tests/tools/install-node-deps does it).
//
//   node client/node/client.js --target 127.0.0.1:50051 generate "Hello"
//   node client/node/client.js --target 127.0.0.1:50051 info
//
// Failures print "error: CODE: message" and exit 1.
'use strict';
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO = path.join(__dirname, '..', '..', 'proto', 'dllm', 'v1', 'dllm.proto');
const USAGE = 'usage: client.js [--target HOST:PORT] [--json] [--timeout S] ' +
  '(generate [--gen-length N] [--steps N] [--seed S] PROMPT | info)';

function parseArgs(argv) {
  const args = { target: '127.0.0.1:50051', json: false, timeout: 0, genLength: 0, steps: 0,
                 seed: null, positional: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--target') args.target = next();
    else if (a === '--json') args.json = true;
    else if (a === '--timeout') args.timeout = Number(next());
    else if (a === '--gen-length') args.genLength = Number(next());
    else if (a === '--steps') args.steps = Number(next());
    else if (a === '--seed') args.seed = next();
    else if (a.startsWith('--')) throw new Error(`unknown flag ${a}`);
    else args.positional.push(a);
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
    prompt: { text: prompt },
    diffusion: { gen_length: args.genLength, steps: args.steps },
    sampling: args.seed === null ? {} : { seed: args.seed },
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
    console.error(`client.js: ${e.message}\n${USAGE}`);
    process.exit(2);
  }
  const [command, ...rest] = args.positional;
  const definition = protoLoader.loadSync(PROTO, {
    keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
  });
  const dllm = grpc.loadPackageDefinition(definition).dllm.v1;
  const client = new dllm.DiffusionLM(args.target, grpc.credentials.createInsecure());
  if (command === 'generate' && rest.length === 1) generate(client, args, rest[0]);
  else if (command === 'info' && rest.length === 0) info(client, args);
  else {
    console.error(USAGE);
    process.exit(2);
  }
}

main();
