#!/usr/bin/python3
"""Reference logits and sampler traces for a llada2 GGUF from the official
LLaDA2 code (ZHZisZZ/dllm, dllm/pipelines/llada2 and llada21), run as-is.

  official_reference.py --zhz-dllm PATH --fork-src PATH --model X.gguf --out DIR
      [--tag TAG] [--cases cases.json] [--routing] [--runs runs.json]

* The GGUF is read with the fork's gguf-py (FORK_SRC/gguf-py) and every tensor
  dequantized to float32 (gguf.quants.dequantize). The official
  LLaDA2MoeModelLM is built with a config derived from the GGUF keys, in
  float32, and the weights are loaded back into HF names: attn_qkv ->
  query_key_value (rows Q, K, V, unchanged), merged experts split back per
  expert, exp_probs_b.bias -> gate.expert_bias.
* transformers is replaced by run-time stand-ins for its plumbing
  (standins.py; no transformers install is needed, torch >= 1.13).
* --cases: for each case one forward over x[:, :window_end] with the official
  block mask, as the samplers build it (absolute blocks of block_length from
  position 0, tril over blocks, log -> 0 / -inf, bf16), positions
  0..window_end-1; all rows' logits are written to DIR/TAG.CASE.f32
  (float32 little-endian, row-major [window_end x n_vocab]).
* --runs: the official LLaDA2.0 sampler (llada2/sampler.py LLaDA2Sampler) and
  LLaDA2.1 sampler (llada21/sampler.py LLaDA21Sampler), each with its own
  modeling file, at temperature 0; every forward is recorded by a wrapper
  around the model call (the samplers are not changed), and DIR/RUN.json
  gets the settings, prompt, steps and final canvas.
* With --cases it also counts, over the cases' rows and MoE layers, how often
  the expert bias and the group limit change the official router's choice;
  --routing writes each case's per-row choices and their margins (how close
  each row was to choosing otherwise) to DIR/TAG.CASE.routing.json.
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standins  # noqa: E402


# ------------------------------------------------------------------ GGUF
def read_gguf(path, fork_src):
    sys.path.insert(0, os.path.join(fork_src, "gguf-py"))
    import gguf
    r = gguf.GGUFReader(path)
    kv = {f.name: f.contents() for f in r.fields.values()}
    tensors, types = {}, {}
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type)
        tensors[t.name] = np.ascontiguousarray(a, dtype=np.float32).reshape(tuple(int(n) for n in reversed(t.shape)))
        types[t.name] = t.tensor_type.name
    return kv, tensors, types


def config_kwargs(kv):
    a = kv["general.architecture"]
    assert a == "llada2", a
    g = lambda k, d=None: kv.get(f"{a}.{k}", d)  # noqa: E731
    assert g("expert_gating_func") == 2, "the official router is sigmoid only"
    assert g("expert_weights_norm", True), "the official router always normalises (top_k > 1)"
    head_dim = g("attention.key_length") or g("embedding_length") // g("attention.head_count")
    n_shared = g("expert_shared_count")
    assert g("expert_shared_feed_forward_length") == g("expert_feed_forward_length") * n_shared
    assert not kv.get("diffusion.shift_logits", False)
    return dict(
        vocab_size=len(kv["tokenizer.ggml.tokens"]),
        hidden_size=g("embedding_length"),
        intermediate_size=g("feed_forward_length"),
        num_hidden_layers=g("block_count"),
        num_attention_heads=g("attention.head_count"),
        num_key_value_heads=g("attention.head_count_kv"),
        head_dim=head_dim,
        partial_rotary_factor=g("rope.dimension_count") / head_dim,
        rope_theta=float(g("rope.freq_base")),
        rms_norm_eps=float(g("attention.layer_norm_rms_epsilon")),
        max_position_embeddings=g("context_length"),
        num_experts=g("expert_count"),
        num_experts_per_tok=g("expert_used_count"),
        n_group=g("expert_group_count"),
        topk_group=g("expert_group_used_count"),
        moe_intermediate_size=g("expert_feed_forward_length"),
        num_shared_experts=n_shared,
        routed_scaling_factor=float(g("expert_weights_scale")),
        first_k_dense_replace=g("leading_dense_block_count"),
        pad_token_id=kv.get("tokenizer.ggml.padding_token_id"),
        hidden_act="silu", use_qkv_bias=False, use_bias=False, use_qk_norm=True,
        tie_word_embeddings=False,
    )


def hf_state_dict(tensors, cfg):
    sd = {"model.word_embeddings.weight": tensors["token_embd.weight"],
          "model.norm.weight": tensors["output_norm.weight"],
          "lm_head.weight": tensors["output.weight"]}
    names = {"attn_norm": "input_layernorm", "attn_qkv": "attention.query_key_value",
             "attn_q_norm": "attention.query_layernorm", "attn_k_norm": "attention.key_layernorm",
             "attn_output": "attention.dense", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
             "ffn_gate_inp": "mlp.gate", "ffn_gate_shexp": "mlp.shared_experts.gate_proj",
             "ffn_up_shexp": "mlp.shared_experts.up_proj", "ffn_down_shexp": "mlp.shared_experts.down_proj"}
    for i in range(cfg.num_hidden_layers):
        p, q = f"blk.{i}.", f"model.layers.{i}."
        for g, h in names.items():
            if p + g + ".weight" in tensors:
                sd[q + h + ".weight"] = tensors[p + g + ".weight"]
        if p + "exp_probs_b.bias" in tensors:
            sd[q + "mlp.gate.expert_bias"] = tensors[p + "exp_probs_b.bias"]
        for g, h in (("ffn_gate_exps", "gate_proj"), ("ffn_up_exps", "up_proj"), ("ffn_down_exps", "down_proj")):
            if p + g + ".weight" in tensors:
                merged = tensors[p + g + ".weight"]  # [X, out, in]
                for e in range(merged.shape[0]):
                    sd[f"{q}mlp.experts.{e}.{h}.weight"] = merged[e]
    return {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in sd.items()}


def build_model(modeling, configuration, kv, tensors):
    cfg = configuration.LLaDA2MoeConfig(**config_kwargs(kv))
    cfg._attn_implementation = "sdpa"  # 4-D float mask passed through and added (see standins)
    model = modeling.LLaDA2MoeModelLM(cfg).float().eval()
    model.load_state_dict(hf_state_dict(tensors, cfg), strict=True)
    return model


def block_attn(total_len, block_length):
    """The samplers' mask expression (llada2/sampler.py, llada21/sampler.py)."""
    assert total_len % block_length == 0
    nb = total_len // block_length
    m = torch.tril(torch.ones(nb, nb))
    return m.repeat_interleave(block_length, dim=0).repeat_interleave(block_length, dim=1) \
        .unsqueeze(0).unsqueeze(0).log().to(torch.bfloat16)


@torch.no_grad()
def forward_case(model, case):
    x = torch.tensor([case["prompt_ids"] + case["canvas_ids"]], dtype=torch.long)
    end = case["window_end"]
    assert x.shape[1] == end, (case, x.shape)
    attn = block_attn(end, case["block_length"])
    pos = torch.arange(end).unsqueeze(0)
    return model(x, attention_mask=attn, position_ids=pos).logits[0].float().numpy()


# ------------------------------------------------------------------ routing
class GateCapture:
    """Forward hooks on the official MoE gates: each MoE layer's gate input
    (the post-attention-normed hidden rows) and its chosen experts."""

    def __init__(self, model):
        self.rows = {}
        self.hooks = []
        for i, layer in enumerate(model.model.layers):
            gate = getattr(layer.mlp, "gate", None)
            if gate is not None and hasattr(gate, "expert_bias"):
                self.hooks.append(gate.register_forward_hook(self._hook(i)))

    def _hook(self, i):
        def f(mod, inp, out):
            h = inp[0].detach()
            self.rows[i] = (mod, h.reshape(-1, h.shape[-1]).float().clone(), out[0].detach().clone())
        return f

    def close(self):
        for h in self.hooks:
            h.remove()


def routing_detail(gate, h, topk_idx):
    """Per row: the official selection, plus how close it was to another one
    (biased-score units): the gap between the topk_group-th and the next
    group's score, and between the top_k-th chosen expert and the best one
    left in the chosen groups. Also the choice without the bias and without
    the group limit (re-derived with the official group_limited_topk)."""
    with torch.no_grad():
        scores = torch.sigmoid(torch.nn.functional.linear(h, gate.weight.float()))
        biased = scores + gate.expert_bias
        T, X = biased.shape
        G = gate.n_group
        gs = biased.view(T, G, -1).topk(2, dim=-1)[0].sum(dim=-1)
        gsort = gs.sort(dim=-1, descending=True).values
        gmargin = gsort[:, gate.topk_group - 1] - gsort[:, gate.topk_group] if gate.topk_group < G \
            else torch.full((T,), float("inf"))
        gidx = torch.topk(gs, k=gate.topk_group, dim=-1, sorted=False)[1]
        gmask = torch.zeros_like(gs).scatter_(1, gidx, 1).unsqueeze(-1).expand(T, G, X // G).reshape(T, -1)
        inside = biased.masked_fill(~gmask.bool(), float("-inf")).sort(dim=-1, descending=True).values
        emargin = inside[:, gate.top_k - 1] - inside[:, gate.top_k]
        sel = lambda idx: [sorted(r) for r in idx.tolist()]  # noqa: E731
        official = sel(topk_idx)
        assert official == sel(gate.group_limited_topk(biased)[1])
        return dict(experts=official,
                    margin=[round(float(v), 6) for v in torch.minimum(gmargin, emargin)],
                    experts_without_bias=sel(gate.group_limited_topk(scores)[1]),
                    experts_without_group_limit=sel(torch.topk(biased, k=gate.top_k, dim=-1)[1]))


def routing_stats(details):
    tot = dict(rows=0, bias_changes=0, group_limit_changes=0, min_margin=float("inf"))
    for layers in details.values():
        for d in layers.values():
            tot["rows"] += len(d["experts"])
            tot["bias_changes"] += sum(a != b for a, b in zip(d["experts"], d["experts_without_bias"]))
            tot["group_limit_changes"] += sum(a != b for a, b in zip(d["experts"], d["experts_without_group_limit"]))
            tot["min_margin"] = min(tot["min_margin"], min(d["margin"]))
    return tot


# ------------------------------------------------------------------ traces
class RecordingModel:
    """Wraps the model call: keeps a copy of each forward's input canvas (the
    sampler writes only between forwards, so consecutive inputs show what each
    step wrote) and the logits it returned."""

    def __init__(self, model):
        self.model = model
        self.calls = []

    @property
    def device(self):
        return self.model.device

    def __call__(self, input_ids, attention_mask=None, position_ids=None, **kw):
        out = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids, **kw)
        self.calls.append((input_ids[0].clone(), out.logits[0].detach().clone()))
        return out


class Tok:
    def __init__(self, mask_id, eos_id):
        self.mask_token_id, self.eos_token_id = mask_id, eos_id


def run_sampler(ns, models, run, mask_id, eos_id):
    kind = run["sampler"]
    s = dict(run["settings"])
    if kind == "llada2.0":
        model, mod = models["2.0"], ns.sampler2
        rec = RecordingModel(model)
        sampler = mod.LLaDA2Sampler(model=rec, tokenizer=Tok(mask_id, eos_id))
        sched = mod.even_transfer_schedule(s["block_size"], min(
            s["steps_per_block"], s["max_new_tokens"] // s.get("minimal_topk", 1)))
    else:
        model, mod = models["2.1"], ns.sampler21
        rec = RecordingModel(model)
        sampler = mod.LLaDA21Sampler(model=rec, tokenizer=Tok(mask_id, eos_id))
        sched = None
    x = sampler.sample([list(run["prompt_ids"])], temperature=0.0, return_dict=False, **s)[0]

    bs, P = s["block_size"], len(run["prompt_ids"])
    thr = s.get("threshold")
    ethr = s.get("editing_threshold")
    n_transfer = s.get("num_to_transfer", 1)
    steps, cur_block, step_in_block = [], None, 0
    inf = float("inf")
    kinds = ("threshold", "editing_threshold", "rank", "token")
    margins = dict.fromkeys(kinds, inf)
    for i, (inp, logits) in enumerate(rec.calls):
        end = inp.shape[0]
        blk = end // bs - 1
        if blk != cur_block:
            cur_block, step_in_block = blk, 0
        nxt = rec.calls[i + 1][0] if i + 1 < len(rec.calls) else x[:end]
        assert torch.equal(nxt[:end - bs], inp[:end - bs])  # only the current block is written
        # The official sample_tokens on the logits the sampler saw (same call).
        tok, p = mod.sample_tokens(logits[-bs:].unsqueeze(0), 0.0, None, None)
        tok, p = tok[0], p[0]
        top2 = torch.topk(torch.softmax(logits[-bs:], dim=-1), 2, dim=-1).values
        gap = top2[:, 0] - top2[:, 1]
        old = inp[end - bs:end]
        new = nxt[end - bs:end]
        active = old == mask_id
        prompt_in_block = torch.arange(end - bs, end) < P
        m2t, t2t = [], []
        for j in range(bs):
            if new[j] != old[j]:
                assert new[j] == tok[j]
                entry = [end - bs + j, int(new[j]), round(float(p[j]), 6)]
                if active[j]:
                    m2t.append(entry)
                else:
                    t2t.append([end - bs + j, int(old[j])] + entry[1:])
        step = dict(forward=i, block=blk, step_in_block=step_in_block, window_end=end,
                    n_masks_before=int(active.sum()))
        # Decision margins (probability units) of this step: how far each
        # comparison that decided what was written is from going the other way.
        m = dict.fromkeys(kinds, inf)
        written = new != old
        if written.any():
            m["token"] = float(gap[written].min())  # argmax of each written position
        n = None
        if active.any():
            pa = p[active]
            step["n_above_threshold"] = int((pa > thr).sum())
            m["threshold"] = float((pa - thr).abs().min())
            n = (int(sched[step_in_block]) if step_in_block < len(sched) else 0) if sched is not None else n_transfer
            if step["n_above_threshold"] < n and int(active.sum()) > n:  # top-n by confidence
                srt = torch.sort(pa, descending=True).values
                m["rank"] = float(srt[n - 1] - srt[n])
        if sched is not None:
            step["schedule_n"] = n
            step["rule"] = "threshold" if step.get("n_above_threshold", 0) >= n else "schedule"
        else:
            editable = (~active) & (~prompt_in_block)
            cand = editable & (tok != old)
            if cand.any():
                m["editing_threshold"] = float((p[cand] - ethr).abs().min())
            hot = editable & (p > ethr)  # an edit if argmax differs from the token there
            if hot.any():
                m["token"] = min(m["token"], float(gap[hot].min()))
            step["rule"] = ("threshold" if step.get("n_above_threshold", 0) >= n_transfer else "top1") \
                if active.any() else "post"
        if active.any():
            # The diff shows every commit unless one wrote mask_id over a mask:
            # check the count the sampler's rule implies.
            if step["rule"] == "threshold":
                want = step["n_above_threshold"]
            else:
                want = min(n, int(active.sum()))
            assert len(m2t) == want, (run["name"], i, len(m2t), want)
        step["m2t"], step["t2t"] = m2t, t2t
        step["margin"] = round(min(m.values()), 6) if min(m.values()) != inf else None
        for k in kinds:
            margins[k] = min(margins[k], m[k])
        steps.append(step)
        step_in_block += 1

    facts = dict(
        forwards=len(steps),
        multi_commit_steps=sum(len(st["m2t"]) > 1 for st in steps),
        threshold_multi_commit_steps=sum(len(st["m2t"]) > 1 and st["rule"] == "threshold" for st in steps),
        fallback_steps=sum(st["rule"] in ("schedule", "top1") for st in steps),
        edits=sum(len(st["t2t"]) for st in steps),
        steps_with_edits=sum(len(st["t2t"]) > 0 for st in steps),
        masks_left=int((x[P:] == mask_id).sum()),
        eos_in_output=bool((x[P:] == eos_id).any()),
        min_margin={k: (round(v, 6) if v != inf else None) for k, v in margins.items()},
    )
    return dict(name=run["name"], sampler=kind,
                code=("dllm/pipelines/llada2/sampler.py LLaDA2Sampler.sample" if kind == "llada2.0"
                      else "dllm/pipelines/llada21/sampler.py LLaDA21Sampler.sample"),
                model_code=("llada2/models/modeling_llada2_moe.py" if kind == "llada2.0"
                            else "llada21/models/modeling_llada21_moe.py"),
                settings=dict(s, temperature=0.0), mask_id=mask_id, eos_id=eos_id,
                prompt_ids=list(run["prompt_ids"]), steps=steps, final=x.tolist(), facts=facts)


@torch.no_grad()
def cross_check_generate(models, run, result, mask_id, eos_id):
    """The LLaDA2.0 modeling file's own generate() on the same settings; its
    output is x[P : P+first_eos+1] (or gen_length tokens)."""
    s = run["settings"]
    if run["sampler"] == "llada2.0":
        out = models["2.0"].generate(torch.tensor([run["prompt_ids"]]), temperature=0.0,
                                     block_length=s["block_size"], steps=s["steps_per_block"],
                                     gen_length=s["max_new_tokens"], threshold=s["threshold"],
                                     eos_early_stop=s.get("eos_early_stop", False),
                                     eos_id=eos_id, mask_id=mask_id)
    else:
        out = models["2.1"].generate(torch.tensor([run["prompt_ids"]]), temperature=0.0,
                                     block_length=s["block_size"], gen_length=s["max_new_tokens"],
                                     threshold=s["threshold"], editing_threshold=s["editing_threshold"],
                                     max_post_steps=s["max_post_steps"],
                                     eos_early_stop=s.get("eos_early_stop", False),
                                     eos_id=eos_id, mask_id=mask_id)
    out = out[0].tolist()
    P = len(run["prompt_ids"])
    gen = result["final"][P:P + s["max_new_tokens"]]
    if eos_id in gen:
        gen = gen[:gen.index(eos_id) + 1]
    return out == gen[:len(out)] and len(out) == len(gen), len(out)


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zhz-dllm", required=True, help="ZHZisZZ/dllm checkout")
    ap.add_argument("--fork-src", required=True, help="the llama.cpp LLaDA2 fork (for gguf-py)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tag", help="file prefix for logits (default: the model's file name)")
    ap.add_argument("--cases")
    ap.add_argument("--runs")
    ap.add_argument("--routing", action="store_true",
                    help="also write DIR/TAG.CASE.routing.json (each MoE layer's experts per row and margins)")
    ap.add_argument("--cross-check-generate", action="store_true",
                    help="also run the modeling files' generate() on each run and compare")
    args = ap.parse_args()

    torch.manual_seed(0)  # only the (overwritten) random init draws from it
    ns = standins.load_official(args.zhz_dllm)
    kv, tensors, types = read_gguf(args.model, args.fork_src)
    models = {"2.0": build_model(ns.model2, ns.config2, kv, tensors),
              "2.1": build_model(ns.model21, ns.config21, kv, tensors)}
    mask_id = int(kv["tokenizer.ggml.mask_token_id"])
    eos_id = int(kv["tokenizer.ggml.eos_token_id"])
    tag = args.tag or os.path.basename(args.model).removesuffix(".gguf")
    os.makedirs(args.out, exist_ok=True)
    with open(args.model, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    print(f"{args.model}: sha256 {sha}; types {sorted(set(types.values()))}; torch {torch.__version__}")

    if args.cases:
        with open(args.cases) as f:
            cases = json.load(f)["cases"]
        details = {}
        for name, case in cases.items():
            cap = GateCapture(models["2.0"])
            lg = forward_case(models["2.0"], case)
            cap.close()
            lg21 = forward_case(models["2.1"], case)
            assert np.array_equal(lg, lg21), "the 2.0 and 2.1 modeling files disagree"
            path = os.path.join(args.out, f"{tag}.{name}.f32")
            lg.astype("<f4").tofile(path)
            details[name] = {i: routing_detail(*cap.rows[i]) for i in sorted(cap.rows)}
            p = torch.softmax(torch.from_numpy(lg), -1).max(-1).values
            print(f"  {path}: {lg.shape[0]} x {lg.shape[1]}, max|logit| {np.abs(lg).max():.3f}, "
                  f"top-1 prob min/median/max {p.min():.3f}/{p.median():.3f}/{p.max():.3f}")
            if args.routing:
                rpath = os.path.join(args.out, f"{tag}.{name}.routing.json")
                with open(rpath, "w") as f:
                    json.dump({"layers": {str(i): {k: v for k, v in d.items()}
                                          for i, d in details[name].items()}},
                              f, separators=(",", ":"))
                    f.write("\n")
        print("  routing:", routing_stats(details))

    if args.runs:
        with open(args.runs) as f:
            runs = json.load(f)["runs"]
        for run in runs:
            res = run_sampler(ns, models, run, mask_id, eos_id)
            path = os.path.join(args.out, f"{run['name']}.json")
            with open(path, "w") as f:
                json.dump(res, f, separators=(",", ":"))
                f.write("\n")
            msg = f"  {path}: {res['facts']}"
            if args.cross_check_generate:
                ok, n = cross_check_generate(models, run, res, mask_id, eos_id)
                msg += f"; generate() agrees: {ok} ({n} tokens)"
            print(msg)


if __name__ == "__main__":
    main()
