#include "engine/model/tensor_layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"

namespace dllm {

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out = {
      {"token_embd.weight", {c.n_embd, c.n_vocab}},
      {"output_norm.weight", {c.n_embd}},
      {"output.weight", {c.n_embd, c.n_vocab}, /*required=*/false},
  };
  const bool dream = c.arch == Arch::kDream;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    out.push_back({p + "attn_norm.weight", {c.n_embd}});
    out.push_back({p + "attn_q.weight", {c.n_embd, c.q_dim()}});
    out.push_back({p + "attn_k.weight", {c.n_embd, c.kv_dim()}});
    out.push_back({p + "attn_v.weight", {c.n_embd, c.kv_dim()}});
    if (dream) {
      out.push_back({p + "attn_q.bias", {c.q_dim()}, false});
      out.push_back({p + "attn_k.bias", {c.kv_dim()}, false});
      out.push_back({p + "attn_v.bias", {c.kv_dim()}, false});
    }
    out.push_back({p + "attn_output.weight", {c.q_dim(), c.n_embd}});
    out.push_back({p + "ffn_norm.weight", {c.n_embd}});
    out.push_back({p + "ffn_gate.weight", {c.n_embd, c.n_ff}});
    out.push_back({p + "ffn_up.weight", {c.n_embd, c.n_ff}});
    out.push_back({p + "ffn_down.weight", {c.n_ff, c.n_embd}});
  }
  return out;
}

std::vector<std::string> CompatibilityProblems(const GgufFile& file, const ModelConfig& c) {
  std::vector<std::string> problems;
  for (const GgufTensor& t : file.tensors()) {
    const GgmlTypeTraits& traits = TraitsOf(t.type);
    if (!traits.supported) {
      problems.push_back(absl::StrCat("unsupported tensor type ", traits.name, " for tensor ",
                                      t.name));
    }
  }
  for (const ExpectedTensor& e : ExpectedTensors(c)) {
    const GgufTensor* t = file.FindTensor(e.name);
    if (t == nullptr) {
      if (e.required) problems.push_back(absl::StrCat("missing tensor ", e.name));
      continue;
    }
    const std::vector<int64_t> shape(t->ne.begin(), t->ne.begin() + t->n_dims);
    if (shape != e.ne) {
      problems.push_back(absl::StrCat("tensor ", e.name, " has shape ", t->ShapeString(),
                                      ", expected [", absl::StrJoin(e.ne, ", "), "]"));
    } else if (e.ne.size() == 1 && t->type != GgmlType::kF32) {
      problems.push_back(absl::StrCat("tensor ", e.name, " is ", GgmlTypeName(t->type),
                                      "; 1-D tensors must be F32"));
    }
  }
  if (c.arch == Arch::kLlada && file.FindTensor("blk.0.attn_q.bias") != nullptr) {
    problems.push_back("llada files have no q/k/v biases, but blk.0.attn_q.bias is present");
  }
  if (c.tokenizer_model != "gpt2") {
    problems.push_back(absl::StrCat("tokenizer.ggml.model is '", c.tokenizer_model,
                                    "'; only byte-level BPE ('gpt2') is supported"));
  }
  if (!file.HasKey("tokenizer.ggml.tokens")) problems.push_back("missing tokenizer.ggml.tokens");
  if (c.tokens.mask < 0) {
    problems.push_back("missing tokenizer.ggml.mask_token_id (diffusion needs a mask token)");
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
