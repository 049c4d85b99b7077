// Prints a tests/data/models/MANIFEST.json entry for one GGUF file, read by
// @huggingface/gguf (an independent parser, not dllm's reader): size,
// sha256, the architecture's hyperparameter keys, the tokenizer's special
// ids and every tensor's type and shape. For model files that
// ../shared/models/MANIFEST.json does not list.
//   node tests/tools/manifest_entry.mjs FILE.gguf
import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { basename } from "node:path";
import { gguf, GGMLQuantizationType } from "@huggingface/gguf";

const path = process.argv[2];
const r = await gguf(path, { allowLocalFile: true });
const md = r.metadata;
const arch = md["general.architecture"];
const keys = [
  "general.architecture", "general.name", "general.file_type", "tokenizer.ggml.pre",
  "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.mask_token_id",
  "tokenizer.ggml.add_bos_token",
];
const kv = {};
for (const k of keys) if (k in md) kv[k] = md[k];
for (const k of Object.keys(md).sort()) {
  if (k.startsWith(arch + ".")) kv[k] = md[k];
}
const tensors = {};
const counts = {};
for (const t of r.tensorInfos) {
  const type = GGMLQuantizationType[t.dtype];
  tensors[t.name] = [type, t.shape.map((d) => Number(d))];
  counts[type] = (counts[type] ?? 0) + 1;
  if (t.name === "token_embd.weight") kv.n_vocab = Number(t.shape[1]);
}
const entry = {
  file: basename(path),
  bytes: statSync(path).size,
  sha256: createHash("sha256").update(readFileSync(path)).digest("hex"),
  kv,
  tensor_type_counts: counts,
  tensors,
};
process.stdout.write(JSON.stringify(entry, (_, v) => (typeof v === "bigint" ? Number(v) : v)) + "\n");
