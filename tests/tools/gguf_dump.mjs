// Prints what @huggingface/gguf (an independent GGUF parser) reads from a
// file, as JSON on stdout: the data offset, every tensor info and every
// metadata value with its GGUF type. 64-bit integers are printed as decimal
// strings so no precision is lost. Used by tests/engine/synth/gguf_writer_test.cc.
import { gguf } from "@huggingface/gguf";

const path = process.argv[2];
const r = await gguf(path, { allowLocalFile: true, typedMetadata: true });
const out = {
  tensor_data_offset: r.tensorDataOffset.toString(),
  tensors: r.tensorInfos.map((t) => ({
    name: t.name,
    n_dims: t.n_dims,
    shape: t.shape.map((d) => d.toString()),
    dtype: t.dtype,
    offset: t.offset.toString(),
  })),
  metadata: r.typedMetadata,
};
process.stdout.write(
  JSON.stringify(out, (_, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n",
);
