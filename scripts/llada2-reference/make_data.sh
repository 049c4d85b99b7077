#!/bin/bash
# Remakes tests/data/llada2 (see its README.md):
#
#   scripts/llada2-reference/make_data.sh FORK_SRC FORK_BUILD ZHZ_DLLM DATA_DIR [WORK_DIR]
#
# FORK_SRC: the llama.cpp LLaDA2 fork (6896bc30e3c8086c7f0368909981306abeea1431),
# FORK_BUILD: its build (bin/llama-quantize), ZHZ_DLLM: a ZHZisZZ/dllm checkout
# (ca17675), DATA_DIR: the output (it must hold cases.json and runs.json),
# WORK_DIR: where the unstored tiny-k F32 file goes (default: a temporary folder).
# PYTHON (default /usr/bin/python3) needs numpy and torch >= 1.13.
set -euo pipefail
if [ $# -lt 4 ]; then sed -n '2,10p' "$0"; exit 2; fi
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
fork=$1 build=$2 zhz=$3 data=$4
work=${5:-$(mktemp -d)}
mkdir -p "$work" "$data/traces"

"$py" "$here/write_tiny_llada2.py" "$fork" "$data/tiny-llada2-f32.gguf" --shape tiny --seed 1
"$build/bin/llama-quantize" "$data/tiny-llada2-f32.gguf" "$data/tiny-llada2-q8_0.gguf" Q8_0 > "$work/quantize-q8_0.log" 2>&1
"$py" "$here/write_tiny_llada2.py" "$fork" "$work/tiny-llada2-k-f32.gguf" --shape tiny-k --seed 1
"$build/bin/llama-quantize" "$work/tiny-llada2-k-f32.gguf" "$data/tiny-llada2-k-q4_k_m.gguf" Q4_K_M > "$work/quantize-q4_k_m.log" 2>&1

ref() { "$py" "$here/official_reference.py" --zhz-dllm "$zhz" --fork-src "$fork" "$@"; }
ref --model "$data/tiny-llada2-f32.gguf" --tag tiny-f32 --out "$data" --cases "$data/cases.json"
ref --model "$data/tiny-llada2-q8_0.gguf" --tag tiny-q8_0 --out "$data" --cases "$data/cases.json"
ref --model "$data/tiny-llada2-k-q4_k_m.gguf" --tag tiny-k-q4_k_m --out "$data" --cases "$data/cases.json"
ref --model "$work/tiny-llada2-k-f32.gguf" --tag tiny-k-f32 --out "$work" --cases "$data/cases.json" --routing
ref --model "$data/tiny-llada2-f32.gguf" --out "$data/traces" --runs "$data/runs.json" --cross-check-generate

"$py" "$here/compare_logits.py" "$data" "$data/cases.json" tiny-f32 tiny-q8_0
sha256sum "$data"/*.gguf "$work/tiny-llada2-k-f32.gguf"
