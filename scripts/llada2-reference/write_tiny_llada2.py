#!/usr/bin/python3
"""Writes a tiny random-weight `llada2` GGUF (all tensors F32) in the layout the
LLaDA2 llama.cpp fork's converter produces (PR #17454, commit 6896bc3).

  write_tiny_llada2.py FORK_SRC OUT_F32.gguf --shape {tiny,tiny-k} [--seed N]

FORK_SRC is a checkout of the fork; its gguf-py is imported from there
(nothing of it is copied). The script replays the writer calls that
`convert_hf_to_gguf.py` makes for an HF `LLaDA2MoeModelLM` folder, in the same
order:

  ModelBase.prepare_metadata   general.type, general.name, general.size_label
  TextModel.set_gguf_parameters block_count ... file_type
  BailingMoeV2Model            rope.dimension_count ... expert_weights_norm
  LLaDA2MoeModel               diffusion.shift_logits = false
  general.quantization_version
  _set_vocab_gpt2 + SpecialVocab  tokenizer.ggml.* (gpt2, pre "bailingmoe2"),
                               merges, eos/pad ids, add_bos/add_eos, chat template
  then tokenizer.ggml.mask_token_id appended last, as
  `gguf_new_metadata.py --special-token-by-id mask ID` does (the fork's
  converter writes it only when SpecialVocab finds a mask token).

Tensors are named and shaped as the converter maps them: fused attn_qkv (rows
Q, K, V), per-head attn_q_norm/attn_k_norm, a leading dense FFN layer, then
MoE layers with ffn_gate_inp, exp_probs_b.bias (the HF gate.expert_bias),
merged 3-D experts (torch.stack over experts) and a shared expert.

The vocabulary is a small byte-level BPE: the 256 GPT-2 byte tokens (in
GPT-2's order, printable bytes first, as the Ling-2.0 vocabulary starts),
merges of common English / Python pairs, then the control tokens
<|endoftext|> (eos, pad), <|mask|>, <role>, </role>, <|role_end|>.

Weight scales (`scales` in main(); --scales overrides them, for experiments
only) were picked with official_reference.py on the stored cases: RMS-norm
weights near 1; attention scores of std ~1; branch outputs smaller than the
residual stream; the routed experts' down projections small (0.05 against the
shared expert's 0.5), so that the few router near-ties that round-off tips
(Q8_0 does, on a handful of rows) move those rows' logits by ~2%, not 10-30%;
a wide router (logits of std ~8) and an expert bias that is a permutation of
evenly spaced values (step 0.02), so that the bias and the group limit both
change many selections; the mask token's embedding row at half length (masked
positions then differ more from each other); the output head at std 4.5 (a
mix of confident and unconfident positions) with a 1.5x longer EOS row (EOS
wins some positions, for the EOS-stop sampler runs).
"""
import argparse
import sys

import numpy as np

SHAPES = {
    # n_embd, heads x head_dim, kv heads, rope part, layers, dense lead, FFN
    # widths, experts, groups, top-k.
    "tiny": dict(hidden_size=64, num_attention_heads=4, head_dim=16, num_key_value_heads=2,
                 partial_rotary_factor=0.5, num_hidden_layers=3, first_k_dense_replace=1,
                 intermediate_size=96, num_experts=16, moe_intermediate_size=32, n_group=4,
                 topk_group=2, num_experts_per_tok=4, num_shared_experts=1),
    # K-quants need rows that are multiples of 256.
    "tiny-k": dict(hidden_size=256, num_attention_heads=4, head_dim=64, num_key_value_heads=2,
                   partial_rotary_factor=0.5, num_hidden_layers=2, first_k_dense_replace=1,
                   intermediate_size=256, num_experts=8, moe_intermediate_size=256, n_group=4,
                   topk_group=2, num_experts_per_tok=2, num_shared_experts=1),
}
COMMON = dict(rope_theta=600000.0, rms_norm_eps=1e-6, routed_scaling_factor=2.5,
              norm_topk_prob=True, score_function="sigmoid", max_position_embeddings=512)

# Merges (rank order) of common English and Python pairs, in GPT-2's byte
# alphabet (Ġ = space, Ċ = newline).
MERGES = [
    ("Ġ", "t"), ("Ġ", "a"), ("h", "e"), ("i", "n"), ("r", "e"), ("o", "n"), ("Ġt", "he"),
    ("e", "r"), ("Ġ", "s"), ("a", "t"), ("Ġ", "w"), ("Ġ", "o"), ("e", "n"), ("Ġ", "c"),
    ("i", "t"), ("i", "s"), ("a", "n"), ("o", "r"), ("e", "s"), ("Ġ", "b"), ("e", "d"),
    ("Ġ", "f"), ("in", "g"), ("Ġ", "p"), ("Ġa", "n"), ("a", "l"), ("Ġt", "o"), ("Ġ", "m"),
    ("Ġo", "f"), ("Ġ", "in"), ("Ġ", "d"), ("Ġan", "d"), ("Ġ", "is"), ("i", "f"), ("Ġ", "if"),
    ("Ġ", "Ġ"), ("ĠĠ", "ĠĠ"), ("d", "e"), ("de", "f"), ("u", "r"), ("ur", "n"), ("re", "t"),
    ("ret", "urn"), ("Ġ", "return"), ("p", "r"), ("in", "t"), ("pr", "int"), ("(", ")"),
    ("()", ":"), ("Ġ", "="), ("Ġf", "or"), ("Ġ", "x"), ("Ġc", "at"), ("Ġ", "+"),
]
SPECIALS = ["<|endoftext|>", "<|mask|>", "<role>", "</role>", "<|role_end|>"]

# A minimal Ling-2.0-style template: renders as llama.cpp's built-in "bailing2"
# (a default "detailed thinking off" system turn when there is none, user ->
# HUMAN, other roles upper-cased, <|role_end|> after each turn).
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' %}<role>SYSTEM</role>detailed thinking off<|role_end|>{% endif %}"
    "{%- for m in messages %}{% if m['role'] == 'user' %}<role>HUMAN</role>"
    "{% else %}<role>{{ m['role'] | upper }}</role>{% endif %}{{ m['content'] }}<|role_end|>{% endfor %}"
    "{%- if add_generation_prompt %}<role>ASSISTANT</role>{% endif %}"
)


def byte_alphabet():
    """GPT-2's bytes_to_unicode, as (byte, char) in its order (printable first)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


def build_vocab():
    tokens = [c for _, c in byte_alphabet()]
    types = [1] * 256  # NORMAL
    for a, b in MERGES:
        assert a in tokens and b in tokens, (a, b)
        t = a + b
        assert t not in tokens, t
        tokens.append(t)
        types.append(1)
    for s in SPECIALS:
        tokens.append(s)
        types.append(3)  # CONTROL (added special tokens)
    return tokens, types


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fork_src")
    ap.add_argument("out")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scales", default="", help="experiments only: override scales, e.g. exp_down=0.2,router=3")
    args = ap.parse_args()

    sys.path.insert(0, args.fork_src + "/gguf-py")
    import gguf  # noqa: E402

    hp = dict(SHAPES[args.shape], **COMMON)
    tokens, types = build_vocab()
    hp["vocab_size"] = V = len(tokens)
    tok_id = {t: i for i, t in enumerate(tokens)}
    eos = pad = tok_id["<|endoftext|>"]
    mask = tok_id["<|mask|>"]

    E, H, d, KV = hp["hidden_size"], hp["num_attention_heads"], hp["head_dim"], hp["num_key_value_heads"]
    F, X, Fe = hp["intermediate_size"], hp["num_experts"], hp["moe_intermediate_size"]
    Fs = Fe * hp["num_shared_experts"]
    L, lead = hp["num_hidden_layers"], hp["first_k_dense_replace"]
    assert H * d == E  # the fork's loader and graph assume it

    # Scales: std of each weight family, relative to 1/sqrt(fan_in) for matrices.
    scales = dict(embd=1.0, mask_embd=0.5, norm=0.1, qk_norm=0.1, qkv=1.0, attn_out=0.5, ffn_in=1.0, ffn_down=0.5,
                  exp_down=0.05, shexp_down=0.5, router=8.0, expert_bias=0.02, output=4.5, eos_out=1.5)
    for item in filter(None, args.scales.split(",")):
        k, v = item.split("=")
        assert k in scales, k
        scales[k] = float(v)

    rng = np.random.default_rng(args.seed)

    def mat(rows, cols, s, *lead_dims):
        return (rng.standard_normal((*lead_dims, rows, cols)) * (s / np.sqrt(cols))).astype(np.float32)

    def norm(n, s):
        return (1.0 + s * rng.standard_normal(n)).astype(np.float32)

    w = gguf.GGUFWriter(args.out, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLADA2])

    # ModelBase.prepare_tensors: tensors as the converter names them (numpy shape
    # = HF weight shape = reversed GGUF ne).
    embd = rng.standard_normal((V, E)) * scales["embd"]
    # the mask token's row is short: a masked position's state is then mostly
    # what attention brings in, so masked positions differ from each other
    embd[mask] *= scales["mask_embd"] / scales["embd"]
    w.add_tensor("token_embd.weight", embd.astype(np.float32))
    for i in range(L):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(E, scales["norm"]))
        w.add_tensor(p + "attn_qkv.weight", mat((H + 2 * KV) * d, E, scales["qkv"]))  # rows Q | K | V
        w.add_tensor(p + "attn_q_norm.weight", norm(d, scales["qk_norm"]))
        w.add_tensor(p + "attn_k_norm.weight", norm(d, scales["qk_norm"]))
        w.add_tensor(p + "attn_output.weight", mat(E, H * d, scales["attn_out"]))
        w.add_tensor(p + "ffn_norm.weight", norm(E, scales["norm"]))
        if i < lead:
            w.add_tensor(p + "ffn_gate.weight", mat(F, E, scales["ffn_in"]))
            w.add_tensor(p + "ffn_up.weight", mat(F, E, scales["ffn_in"]))
            w.add_tensor(p + "ffn_down.weight", mat(E, F, scales["ffn_down"]))
        else:
            w.add_tensor(p + "ffn_gate_inp.weight", mat(X, E, scales["router"]))
            # expert bias: a random permutation of evenly spaced values (no two
            # experts' biases close, so ties among saturated router scores are rare)
            w.add_tensor(p + "exp_probs_b.bias",
                         (scales["expert_bias"] * (rng.permutation(X) - (X - 1) / 2)).astype(np.float32))
            # torch.stack(dim=0) over experts: numpy (X, rows, cols), ne {cols, rows, X}
            w.add_tensor(p + "ffn_down_exps.weight", mat(E, Fe, scales["exp_down"], X))
            w.add_tensor(p + "ffn_gate_exps.weight", mat(Fe, E, scales["ffn_in"], X))
            w.add_tensor(p + "ffn_up_exps.weight", mat(Fe, E, scales["ffn_in"], X))
            w.add_tensor(p + "ffn_gate_shexp.weight", mat(Fs, E, scales["ffn_in"]))
            w.add_tensor(p + "ffn_up_shexp.weight", mat(Fs, E, scales["ffn_in"]))
            w.add_tensor(p + "ffn_down_shexp.weight", mat(E, Fs, scales["shexp_down"]))
    w.add_tensor("output_norm.weight", norm(E, scales["norm"]))
    out = mat(V, E, scales["output"])
    out[eos] *= scales["eos_out"]  # a longer EOS row: EOS wins some positions
    w.add_tensor("output.weight", out)

    # ModelBase.prepare_metadata: set_type, Metadata.set_gguf_meta_model
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name("tiny-llada2" if args.shape == "tiny" else "tiny-llada2-k")
    total, shared, expert, count = w.get_total_parameter_count()
    w.add_size_label(gguf.size_label(total, shared, expert, count))
    # TextModel.set_gguf_parameters
    w.add_block_count(L)
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(E)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(hp["rope_theta"])
    w.add_layer_norm_rms_eps(hp["rms_norm_eps"])
    w.add_expert_used_count(hp["num_experts_per_tok"])
    w.add_expert_group_count(hp["n_group"])
    w.add_expert_group_used_count(hp["topk_group"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_key_length(d)
    w.add_value_length(d)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    # BailingMoeV2Model.set_gguf_parameters
    w.add_rope_dimension_count(int(d * hp["partial_rotary_factor"]))
    w.add_rope_scaling_type(gguf.RopeScalingType.NONE)
    w.add_leading_dense_block_count(lead)
    w.add_vocab_size(V)
    w.add_expert_feed_forward_length(Fe)
    w.add_expert_shared_feed_forward_length(Fs)
    w.add_expert_weights_scale(hp["routed_scaling_factor"])
    w.add_expert_count(X)
    w.add_expert_shared_count(hp["num_shared_experts"])
    w.add_expert_weights_norm(hp["norm_topk_prob"])
    # LLaDA2MoeModel.set_gguf_parameters
    w.add_diffusion_shift_logits(False)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    # TextModel._set_vocab_gpt2 + SpecialVocab(load_merges=True).add_to_gguf
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("bailingmoe2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{a} {b}" for a, b in MERGES])
    w.add_eos_token_id(eos)
    w.add_pad_token_id(pad)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    # gguf_new_metadata.py --special-token-by-id mask ID: appended after the rest
    w.add_key_value(gguf.Keys.Tokenizer.MASK_ID, mask, gguf.GGUFValueType.UINT32)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{args.out}: shape {args.shape}, seed {args.seed}, n_vocab {V}, eos=pad {eos}, mask {mask}, "
          f"<role> {tok_id['<role>']}, </role> {tok_id['</role>']}, <|role_end|> {tok_id['<|role_end|>']}")


if __name__ == "__main__":
    main()
