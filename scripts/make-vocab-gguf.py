#!/usr/bin/env python3
"""Writes a vocab-only GGUF (v3): `general.architecture` and every
`tokenizer.*` key of a source GGUF, no tensors. Like llama.cpp's
ggml-vocab-*.gguf files, these let tokenizer tests run without the model.

Pure Python, no dependencies:

    scripts/make-vocab-gguf.py SRC.gguf DST.gguf      # extract
    scripts/make-vocab-gguf.py --dump SRC.gguf        # print the tokenizer keys
"""
import struct
import sys

# GGUF metadata value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
          F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError(f"truncated at offset {self.pos}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def scalar(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return self.take(self.scalar("<Q"))

    def value(self, vtype):
        """Returns (type, raw encoded bytes of the value, python value)."""
        start = self.pos
        if vtype in SCALAR:
            v = self.scalar(SCALAR[vtype])
        elif vtype == STR:
            v = self.string()
        elif vtype == ARR:
            etype = self.scalar("<I")
            n = self.scalar("<Q")
            v = (etype, [self.value(etype)[2] for _ in range(n)])
        else:
            raise ValueError(f"unknown value type {vtype} at offset {start}")
        return vtype, self.data[start:self.pos], v


def read_kvs(path):
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if r.take(4) != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version = r.scalar("<I")
    if version not in (2, 3):
        raise ValueError(f"{path}: unsupported GGUF version {version}")
    r.scalar("<Q")  # tensor count
    n_kv = r.scalar("<Q")
    kvs = []
    for _ in range(n_kv):
        key = r.string().decode("utf-8")
        vtype = r.scalar("<I")
        kvs.append((key, *r.value(vtype)))
    return kvs


def wanted(key):
    return key == "general.architecture" or key.startswith("tokenizer.")


def write_vocab(kvs, path):
    kvs = [kv for kv in kvs if wanted(kv[0])]
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", 3, 0, len(kvs))
    for key, vtype, raw, _ in kvs:
        k = key.encode("utf-8")
        out += struct.pack("<Q", len(k)) + k + struct.pack("<I", vtype) + raw
    with open(path, "wb") as f:
        f.write(out)


def summary(vtype, v):
    if vtype == ARR:
        etype, items = v
        head = ", ".join(repr(x) for x in items[:6])
        return f"array[{etype}] n={len(items)} [{head}, ...]"
    if vtype == STR:
        return repr(v.decode("utf-8", "replace")[:200])
    return repr(v)


def main(argv):
    if len(argv) == 3 and argv[1] == "--dump":
        for key, vtype, _, v in read_kvs(argv[2]):
            if wanted(key):
                print(f"{key}: {summary(vtype, v)}")
        return 0
    if len(argv) == 3:
        write_vocab(read_kvs(argv[1]), argv[2])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
