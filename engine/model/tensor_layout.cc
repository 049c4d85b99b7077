#include "engine/model/tensor_layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/linear.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"

namespace dllm {

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c) {
  const ArchTraits& arch = c.traits();
  std::vector<ExpectedTensor> out = {
      {"token_embd.weight", {c.n_embd, c.n_vocab}},
      {"output_norm.weight", {c.n_embd}},
      {"output.weight", {c.n_embd, c.n_vocab}, arch.output_required},
  };
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    out.push_back({p + "attn_norm.weight", {c.n_embd}});
    out.push_back({p + "attn_q.weight", {c.n_embd, c.q_dim()}});
    out.push_back({p + "attn_k.weight", {c.n_embd, c.kv_dim()}});
    out.push_back({p + "attn_v.weight", {c.n_embd, c.kv_dim()}});
    if (arch.qkv_bias) {
      out.push_back({p + "attn_q.bias", {c.q_dim()}, false});
      out.push_back({p + "attn_k.bias", {c.kv_dim()}, false});
      out.push_back({p + "attn_v.bias", {c.kv_dim()}, false});
    }
    if (arch.qk_norm) {
      out.push_back({p + "attn_q_norm.weight", {c.head_dim}});
      out.push_back({p + "attn_k_norm.weight", {c.head_dim}});
    }
    out.push_back({p + "attn_output.weight", {c.q_dim(), c.n_embd}});
    out.push_back({p + "ffn_norm.weight", {c.n_embd}});
    if (arch.moe) {
      out.push_back({p + "ffn_gate_inp.weight", {c.n_embd, c.n_expert}});
      out.push_back({p + "ffn_gate_exps.weight", {c.n_embd, c.n_ff_exp, c.n_expert}});
      out.push_back({p + "ffn_up_exps.weight", {c.n_embd, c.n_ff_exp, c.n_expert}});
      out.push_back({p + "ffn_down_exps.weight", {c.n_ff_exp, c.n_embd, c.n_expert}});
    } else {
      out.push_back({p + "ffn_gate.weight", {c.n_embd, c.n_ff}});
      out.push_back({p + "ffn_up.weight", {c.n_embd, c.n_ff}});
      out.push_back({p + "ffn_down.weight", {c.n_ff, c.n_embd}});
    }
  }
  return out;
}

namespace {

// Why a tensor's shape is what it is, for the MoE tensors whose extents come
// from the expert keys: the message names the keys and their values.
std::string ShapeSource(const ModelConfig& c, absl::string_view name) {
  const std::string a(ArchName(c.arch));
  if (absl::StrContains(name, "_exps.")) {
    return absl::StrCat(" (from ", a, ".expert_feed_forward_length = ", c.n_ff_exp, ", ", a,
                        ".expert_count = ", c.n_expert, ")");
  }
  if (absl::StrContains(name, "ffn_gate_inp.")) {
    return absl::StrCat(" (from ", a, ".expert_count = ", c.n_expert, ")");
  }
  return "";
}

}  // namespace

std::vector<std::string> CompatibilityProblems(const GgufFile& file, const ModelConfig& c) {
  std::vector<std::string> problems;
  for (const GgufTensor& t : file.tensors()) {
    const GgmlTypeTraits& traits = TraitsOf(t.type);
    if (!traits.supported) {
      problems.push_back(absl::StrCat("unsupported tensor type ", traits.name, " for tensor ",
                                      t.name));
    }
  }
  const ArchTraits& arch = c.traits();
  if (file.FindTensor("blk.0.attn_qkv.weight") != nullptr) {
    problems.push_back("unsupported tensor layout: fused blk.0.attn_qkv.weight (separate "
                       "attn_q/attn_k/attn_v are supported)");
  }
  if (file.FindTensor("blk.0.ffn_gate_up_exps.weight") != nullptr) {
    problems.push_back("unsupported tensor layout: merged blk.0.ffn_gate_up_exps.weight");
  }
  if (!arch.qkv_bias && file.FindTensor("blk.0.attn_q.bias") != nullptr) {
    problems.push_back(absl::StrCat(arch.name, " files have no q/k/v biases, but "
                                    "blk.0.attn_q.bias is present"));
  }
  if (arch.q_is_n_embd && c.q_dim() != c.n_embd) {
    problems.push_back(absl::StrCat(arch.name, ": head_count ", c.n_head, " x key_length ",
                                    c.head_dim, " = ", c.q_dim(), " must equal embedding_length ",
                                    c.n_embd, " (attn_q is [n_embd, n_embd])"));
  }
  const std::vector<ExpectedTensor> expected = ExpectedTensors(c);
  absl::flat_hash_set<absl::string_view> known;
  for (const ExpectedTensor& e : expected) {
    known.insert(e.name);
    const GgufTensor* t = file.FindTensor(e.name);
    if (t == nullptr) {
      if (e.required) problems.push_back(absl::StrCat("missing tensor ", e.name));
      continue;
    }
    const std::vector<int64_t> shape(t->ne.begin(), t->ne.begin() + t->n_dims);
    if (shape != e.ne) {
      problems.push_back(absl::StrCat("tensor ", e.name, " has shape ", t->ShapeString(),
                                      ", expected [", absl::StrJoin(e.ne, ", "), "]",
                                      ShapeSource(c, e.name)));
    } else if (e.ne.size() == 1 && t->type != GgmlType::kF32) {
      problems.push_back(absl::StrCat("tensor ", e.name, " is ", GgmlTypeName(t->type),
                                      "; 1-D tensors must be F32"));
    } else if (e.ne.size() > 1 && TraitsOf(t->type).supported) {
      if (std::string problem = LinearProblem(*t); !problem.empty()) {
        problems.push_back(std::move(problem));
      }
    }
  }
  // llama.cpp refuses a file with tensors its graph does not create ("wrong
  // number of tensors"); the optional ones it would use (output.bias, ffn
  // biases) are not part of the graph dllm runs.
  for (const GgufTensor& t : file.tensors()) {
    if (!known.contains(t.name) && !absl::StrContains(t.name, "attn_qkv") &&
        !absl::StrContains(t.name, "gate_up_exps") && !absl::EndsWith(t.name, "attn_q.bias")) {
      problems.push_back(absl::StrCat("unsupported tensor ", t.name, " (not part of the ",
                                      arch.name, " graph)"));
      break;
    }
  }
  if (c.tokenizer_model != "gpt2") {
    problems.push_back(absl::StrCat("tokenizer.ggml.model is '", c.tokenizer_model,
                                    "'; only byte-level BPE ('gpt2') is supported"));
  }
  if (!file.HasKey("tokenizer.ggml.tokens")) problems.push_back("missing tokenizer.ggml.tokens");
  if (c.tokens.mask < 0) {
    problems.push_back("missing tokenizer.ggml.mask_token_id (diffusion needs a mask token)");
  } else {
    for (const auto& [key, id] : {std::pair{"eos_token_id", c.tokens.eos},
                                  {"eot_token_id", c.tokens.eot}, {"bos_token_id", c.tokens.bos}}) {
      if (id == c.tokens.mask) {
        problems.push_back(absl::StrCat("tokenizer.ggml.mask_token_id ", id, " is also the ",
                                        key, " (the sampler could not tell a committed token "
                                        "from a masked one)"));
      }
    }
  }
  // A prompt token and one generated position: the least a generation (and
  // the server's warm-up) needs.
  if (c.n_ctx_train < kMinContextLength) {
    problems.push_back(absl::StrCat(ArchName(c.arch), ".context_length ", c.n_ctx_train,
                                    " is below ", kMinContextLength,
                                    " (a prompt token and a generated position)"));
  }
  return problems;
}

absl::Status CheckCompatible(const GgufFile& file, const ModelConfig& config) {
  const std::vector<std::string> problems = CompatibilityProblems(file, config);
  if (problems.empty()) return absl::OkStatus();
  const std::string msg = absl::StrCat("gguf: ", file.path(), ": ", problems.front());
  return absl::StartsWith(problems.front(), "unsupported") ? absl::UnimplementedError(msg)
                                                           : absl::InvalidArgumentError(msg);
}

}  // namespace dllm
