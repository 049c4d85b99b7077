#include "engine/model/tensor_layout.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/linear.h"

namespace dllm {

std::string LayerPrefix(int64_t layer) { return absl::StrCat("blk.", layer, "."); }

namespace {

// The parts of a layer, one function per kind: each appends its tensors.
// Adding a kind adds a function here and a part to LayerWeights.
using Tensors = std::vector<LayerTensor>;

void AttentionTensors(const ModelConfig& c, const LayerConfig& l, Tensors& out) {
  const int64_t q_dim = l.q_dim(), kv_dim = l.kv_dim();
  out.push_back(
      {"attn_norm.weight", {c.n_embd}, true, [](LayerWeights& w) { return &w.attention.norm; }});
  if (l.fused_qkv) {
    LayerTensor qkv{"attn_qkv.weight", {c.n_embd, q_dim + 2 * kv_dim}};
    qkv.cuts = {{[](LayerWeights& w) { return &w.attention.wq; }, q_dim},
                {[](LayerWeights& w) { return &w.attention.wk; }, kv_dim},
                {[](LayerWeights& w) { return &w.attention.wv; }, kv_dim}};
    out.push_back(std::move(qkv));
  } else {
    out.push_back({"attn_q.weight", {c.n_embd, q_dim}, true, nullptr, [](LayerWeights& w) {
                     return &w.attention.wq;
                   }});
    out.push_back({"attn_k.weight", {c.n_embd, kv_dim}, true, nullptr, [](LayerWeights& w) {
                     return &w.attention.wk;
                   }});
  }
  if (!l.value_is_key && !l.fused_qkv) {
    out.push_back({"attn_v.weight", {c.n_embd, kv_dim}, true, nullptr, [](LayerWeights& w) {
                     return &w.attention.wv;
                   }});
  }
  if (l.qkv_bias) {
    out.push_back({"attn_q.bias", {q_dim}, false, [](LayerWeights& w) { return &w.attention.bq; }});
    out.push_back(
        {"attn_k.bias", {kv_dim}, false, [](LayerWeights& w) { return &w.attention.bk; }});
    out.push_back(
        {"attn_v.bias", {kv_dim}, false, [](LayerWeights& w) { return &w.attention.bv; }});
  }
  if (l.qk_norm) {
    out.push_back({"attn_q_norm.weight", {l.head_dim}, true, [](LayerWeights& w) {
                     return &w.attention.q_norm;
                   }});
    out.push_back({"attn_k_norm.weight", {l.head_dim}, true, [](LayerWeights& w) {
                     return &w.attention.k_norm;
                   }});
  }
  out.push_back({"attn_output.weight", {q_dim, c.n_embd}, true, nullptr, [](LayerWeights& w) {
                   return &w.attention.wo;
                 }});
  if (l.post_norms) {
    out.push_back({"post_attention_norm.weight", {c.n_embd}, true, [](LayerWeights& w) {
                     return &w.attention.post_norm;
                   }});
  }
}

void SwiGluTensors(const ModelConfig& c, const LayerConfig& l, Tensors& out) {
  out.push_back({"ffn_gate.weight", {c.n_embd, l.n_ff}, true, nullptr, [](LayerWeights& w) {
                   return &w.dense.gate;
                 }});
  out.push_back({"ffn_up.weight", {c.n_embd, l.n_ff}, true, nullptr, [](LayerWeights& w) {
                   return &w.dense.up;
                 }});
  out.push_back({"ffn_down.weight", {l.n_ff, c.n_embd}, true, nullptr, [](LayerWeights& w) {
                   return &w.dense.down;
                 }});
}

void RouterTensor(const ModelConfig& c, const LayerConfig& l, Tensors& out) {
  out.push_back({"ffn_gate_inp.weight", {c.n_embd, l.n_expert}, true, nullptr, [](LayerWeights& w) {
                   return &w.moe.router;
                 }});
}

void DownExpertsTensor(const ModelConfig& c, const LayerConfig& l, Tensors& out) {
  out.push_back({"ffn_down_exps.weight",
                 {l.n_ff_expert, c.n_embd, l.n_expert},
                 true,
                 nullptr,
                 nullptr,
                 &GatedFfnWeights::down});
}

void MoeTensors(const ModelConfig& c, const LayerConfig& l, Tensors& out) {
  RouterTensor(c, l, out);
  if (l.router_score == RouterScore::kSigmoid) {
    out.push_back({"exp_probs_b.bias", {l.n_expert}, false, [](LayerWeights& w) {
                     return &w.moe.expert_bias;
                   }});
  }
  out.push_back({"ffn_gate_exps.weight",
                 {c.n_embd, l.n_ff_expert, l.n_expert},
                 true,
                 nullptr,
                 nullptr,
                 &GatedFfnWeights::gate});
  out.push_back({"ffn_up_exps.weight",
                 {c.n_embd, l.n_ff_expert, l.n_expert},
                 true,
                 nullptr,
                 nullptr,
                 &GatedFfnWeights::up});
  DownExpertsTensor(c, l, out);
  if (l.n_ff_shared > 0) {
    out.push_back(
        {"ffn_gate_shexp.weight", {c.n_embd, l.n_ff_shared}, true, nullptr, [](LayerWeights& w) {
           return &w.moe.shared.gate;
         }});
    out.push_back(
        {"ffn_up_shexp.weight", {c.n_embd, l.n_ff_shared}, true, nullptr, [](LayerWeights& w) {
           return &w.moe.shared.up;
         }});
    out.push_back(
        {"ffn_down_shexp.weight", {l.n_ff_shared, c.n_embd}, true, nullptr, [](LayerWeights& w) {
           return &w.moe.shared.down;
         }});
  }
}

// DiffusionGemma's FFN: the dense GeGLU (SwiGluTensors' names), the router
// with its input scale, the fused gate-up experts with their output scales,
// and the four norms around the two branches.
void GeGluMoeTensors(const ModelConfig& c, const LayerConfig& l, Tensors& out) {
  SwiGluTensors(c, l, out);
  RouterTensor(c, l, out);
  out.push_back({"ffn_gate_inp.scale", {c.n_embd}, true, [](LayerWeights& w) {
                   return &w.moe.router_input_scale;
                 }});
  out.push_back({"ffn_gate_up_exps.weight",
                 {c.n_embd, 2 * l.n_ff_expert, l.n_expert},
                 true,
                 nullptr,
                 nullptr,
                 &GatedFfnWeights::gate,
                 &GatedFfnWeights::up});
  DownExpertsTensor(c, l, out);
  out.push_back({"ffn_down_exps.scale", {l.n_expert}, false, [](LayerWeights& w) {
                   return &w.moe.down_scale;
                 }});
  out.push_back({"post_ffw_norm_1.weight", {c.n_embd}, true, [](LayerWeights& w) {
                   return &w.dense_post_norm;
                 }});
  out.push_back(
      {"pre_ffw_norm_2.weight", {c.n_embd}, true, [](LayerWeights& w) { return &w.experts_norm; }});
  out.push_back({"post_ffw_norm_2.weight", {c.n_embd}, true, [](LayerWeights& w) {
                   return &w.experts_post_norm;
                 }});
}

// Indexed by FfnKind.
constexpr void (*kFfnTensors[])(const ModelConfig&, const LayerConfig&, Tensors&) = {
    SwiGluTensors, MoeTensors, GeGluMoeTensors};

}  // namespace

std::vector<LayerTensor> LayerTensors(const ModelConfig& c, const LayerConfig& l) {
  Tensors out;
  AttentionTensors(c, l, out);
  out.push_back({"ffn_norm.weight", {c.n_embd}, true, [](LayerWeights& w) { return &w.ffn_norm; }});
  kFfnTensors[static_cast<int>(l.ffn)](c, l, out);
  if (l.post_norms) {
    out.push_back({"post_ffw_norm.weight", {c.n_embd}, true, [](LayerWeights& w) {
                     return &w.ffn_post_norm;
                   }});
  }
  if (l.output_scales) {
    out.push_back(
        {"layer_output_scale.weight", {1}, true, [](LayerWeights& w) { return &w.output_scale; }});
    out.push_back({"enc_layer_output_scale.weight", {1}, true, [](LayerWeights& w) {
                     return &w.encoder_output_scale;
                   }});
  }
  return out;
}

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out = {
      {kTokenEmbdTensor, {c.n_embd, c.n_vocab}},
      {kOutputNormTensor, {c.n_embd}},
      {kOutputTensor, {c.n_embd, c.n_vocab}, c.traits().output_required},
  };
  for (const RopeSpec& rope : c.ropes) {
    if (!rope.freq_factors.empty()) {
      out.push_back({kRopeFreqsTensor, {static_cast<int64_t>(rope.freq_factors.size())}});
    }
  }
  if (c.traits().gemma) {
    // Optional to the reference's loader, but its graph reads all four
    // whenever self-conditioning is on (ReadGemmaLayers refuses a part).
    out.push_back({kSelfCondPreNormTensor, {c.n_embd}, false});
    out.push_back({kSelfCondGateTensor, {c.n_embd, c.n_ff}, false});
    out.push_back({kSelfCondUpTensor, {c.n_embd, c.n_ff}, false});
    out.push_back({kSelfCondDownTensor, {c.n_ff, c.n_embd}, false});
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = LayerPrefix(l);
    for (LayerTensor& t : LayerTensors(c, c.layers[static_cast<size_t>(l)])) {
      out.push_back({prefix + t.suffix, std::move(t.ne), t.required});
    }
  }
  return out;
}

namespace {

// Why a tensor's shape is what it is, for the MoE tensors whose extents come
// from the expert keys: the message names the keys and their values.
std::string ShapeSource(const ModelConfig& c, absl::string_view name) {
  const std::string a(ArchName(c.arch));
  if (absl::StrContains(name, "_exps.weight")) {
    return absl::StrCat(" (from ", a, ".expert_feed_forward_length = ", c.n_ff_exp, ", ", a,
                        ".expert_count = ", c.n_expert, ")");
  }
  if (absl::StrContains(name, "ffn_gate_inp.")) {
    return absl::StrCat(" (from ", a, ".expert_count = ", c.n_expert, ")");
  }
  return "";
}

}  // namespace

std::vector<CompatibilityProblem> CompatibilityProblems(const GgufFile& file,
                                                        const ModelConfig& c) {
  std::vector<CompatibilityProblem> problems;
  const auto unsupported = [&problems](std::string message) {
    problems.push_back({absl::StatusCode::kUnimplemented, std::move(message)});
  };
  const auto invalid = [&problems](std::string message) {
    problems.push_back({absl::StatusCode::kInvalidArgument, std::move(message)});
  };
  for (const GgufTensor& t : file.tensors()) {
    const GgmlTypeTraits& traits = TraitsOf(t.type);
    if (!traits.supported) {
      unsupported(absl::StrCat("unsupported tensor type ", traits.name, " for tensor ", t.name));
    }
  }
  const ArchTraits& arch = c.traits();
  if (!arch.ling_moe && file.FindTensor("blk.0.attn_qkv.weight") != nullptr) {
    unsupported(
        "unsupported tensor layout: fused blk.0.attn_qkv.weight (separate "
        "attn_q/attn_k/attn_v are supported)");
  }
  if (!arch.gemma && file.FindTensor("blk.0.ffn_gate_up_exps.weight") != nullptr) {
    unsupported("unsupported tensor layout: merged blk.0.ffn_gate_up_exps.weight");
  }
  if (!arch.qkv_bias && file.FindTensor("blk.0.attn_q.bias") != nullptr) {
    invalid(absl::StrCat(arch.name,
                         " files have no q/k/v biases, but "
                         "blk.0.attn_q.bias is present"));
  }
  if (arch.q_is_n_embd && c.n_head * c.head_dim != c.n_embd) {
    invalid(absl::StrCat(arch.name, ": head_count ", c.n_head, " x key_length ", c.head_dim, " = ",
                         c.n_head * c.head_dim, " must equal embedding_length ", c.n_embd,
                         " (attn_q is [n_embd, n_embd])"));
  }
  const std::vector<ExpectedTensor> expected = ExpectedTensors(c);
  absl::flat_hash_set<absl::string_view> known;
  for (const ExpectedTensor& e : expected) {
    known.insert(e.name);
    const GgufTensor* t = file.FindTensor(e.name);
    if (t == nullptr) {
      if (e.required) invalid(absl::StrCat("missing tensor ", e.name));
      continue;
    }
    const std::vector<int64_t> shape(t->ne.begin(), t->ne.begin() + t->n_dims);
    if (shape != e.ne) {
      invalid(absl::StrCat("tensor ", e.name, " has shape ", t->ShapeString(), ", expected [",
                           absl::StrJoin(e.ne, ", "), "]", ShapeSource(c, e.name)));
    } else if (e.ne.size() == 1 && t->type != GgmlType::kF32) {
      invalid(absl::StrCat("tensor ", e.name, " is ", GgmlTypeName(t->type),
                           "; 1-D tensors must be F32"));
    } else if (e.ne.size() > 1 && TraitsOf(t->type).supported) {
      // The kernels' own limits: every one an unsupported type or layout.
      if (std::string problem = LinearProblem(*t); !problem.empty())
        unsupported(std::move(problem));
    }
  }
  // llama.cpp refuses a file with tensors its graph does not create ("wrong
  // number of tensors"); the optional ones it would use (output.bias, ffn
  // biases) are not part of the graph dllm runs.
  for (const GgufTensor& t : file.tensors()) {
    if (!known.contains(t.name) && !absl::StrContains(t.name, "attn_qkv") &&
        !(!arch.gemma && absl::StrContains(t.name, "gate_up_exps")) &&
        !absl::EndsWith(t.name, "attn_q.bias")) {
      unsupported(
          absl::StrCat("unsupported tensor ", t.name, " (not part of the ", arch.name, " graph)"));
      break;
    }
  }
  if (c.tokenizer_model != "gpt2" && c.tokenizer_model != "gemma4") {
    unsupported(absl::StrCat("tokenizer.ggml.model is '", c.tokenizer_model,
                             "'; only byte-level BPE ('gpt2') and Gemma 4's BPE ('gemma4') "
                             "are supported"));
  }
  if (!file.HasKey("tokenizer.ggml.tokens")) invalid("missing tokenizer.ggml.tokens");
  if (c.tokens.mask < 0) {
    invalid("missing tokenizer.ggml.mask_token_id (diffusion needs a mask token)");
  } else {
    for (const auto& [key, id] : {std::pair{"eos_token_id", c.tokens.eos},
                                  {"eot_token_id", c.tokens.eot},
                                  {"bos_token_id", c.tokens.bos}}) {
      if (id == c.tokens.mask) {
        invalid(absl::StrCat("tokenizer.ggml.mask_token_id ", id, " is also the ", key,
                             " (the sampler could not tell a committed token "
                             "from a masked one)"));
      }
    }
  }
  // A prompt token and one generated position: the least a generation (and
  // the server's warm-up) needs.
  if (c.n_ctx_train < kMinContextLength) {
    invalid(absl::StrCat(ArchName(c.arch), ".context_length ", c.n_ctx_train, " is below ",
                         kMinContextLength, " (a prompt token and a generated position)"));
  }
  return problems;
}

absl::Status CheckCompatible(const GgufFile& file, const ModelConfig& config) {
  const std::vector<CompatibilityProblem> problems = CompatibilityProblems(file, config);
  if (problems.empty()) return absl::OkStatus();
  return absl::Status(problems.front().code,
                      absl::StrCat("gguf: ", file.path(), ": ", problems.front().message));
}

}  // namespace dllm
