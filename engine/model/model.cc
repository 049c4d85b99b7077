#include "engine/model/model.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/model/tensor_layout.h"

namespace dllm {
namespace {

// Prefixes a status with the model path, keeping its code.
absl::Status WithPath(const std::string& path, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
}

// Expert `e` of a 3-D expert tensor ([n_in, n_out, n_expert]) as a 2-D
// tensor over the same mapped bytes: experts are contiguous, outermost.
GgufTensor ExpertSlice(const GgufTensor& t, int64_t e) {
  GgufTensor slice = t;
  slice.n_dims = 2;
  slice.ne = {t.ne[0], t.ne[1], 1, 1};
  slice.n_bytes = t.n_bytes / static_cast<uint64_t>(t.ne[2]);
  slice.offset = t.offset + slice.n_bytes * static_cast<uint64_t>(e);
  slice.data = t.data + slice.n_bytes * static_cast<uint64_t>(e);
  return slice;
}

}  // namespace

absl::StatusOr<ModelSpec> ReadModelSpec(const GgufFile& f) {
  ModelSpec spec;
  DLLM_ASSIGN_OR_RETURN(spec.config, ModelConfigFromGguf(f));
  DLLM_RETURN_IF_ERROR(CheckCompatible(f, spec.config));
  absl::StatusOr<BpeTokenizer> tokenizer = BpeTokenizer::FromGguf(f);
  if (!tokenizer.ok()) return WithPath(f.path(), tokenizer.status());
  spec.tokenizer = std::make_unique<BpeTokenizer>(std::move(*tokenizer));
  spec.chat_template = DetectChatTemplate(f);
  return spec;
}

absl::StatusOr<std::shared_ptr<const Model>> Model::Load(const std::string& path,
                                                         const ModelOptions& options) {
  DLLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  std::shared_ptr<Model> m(new Model(std::move(file)));
  m->options_ = options;
  DLLM_ASSIGN_OR_RETURN(ModelSpec spec, ReadModelSpec(m->file_));
  m->config_ = std::move(spec.config);
  m->tokenizer_ = std::move(spec.tokenizer);
  m->chat_template_ = options.chat_template.value_or(spec.chat_template);

  const GgufFile& f = m->file_;
  const ModelConfig& c = m->config_;
  auto f32 = [&f](const std::string& name) -> const float* {
    const GgufTensor* t = f.FindTensor(name);
    return t ? reinterpret_cast<const float*>(t->data) : nullptr;
  };
  // Repacked weights release their mapped pages, except token_embd, which
  // the embedding lookup keeps reading (also when it doubles as the head).
  std::vector<MappedFile::Range> repacked;  // file bytes nothing reads again
  auto linear = [&](const GgufTensor& t) -> absl::StatusOr<std::unique_ptr<Linear>> {
    const bool release = t.name != "token_embd.weight";
    absl::StatusOr<Linear> l = Linear::Create(t, options.isa, release);
    if (!l.ok()) return WithPath(path, l.status());
    if (release && l->int8()) repacked.push_back({f.data_offset() + t.offset, t.n_bytes});
    m->owned_weight_bytes_ += l->owned_bytes();
    return std::make_unique<Linear>(std::move(*l));
  };
  auto named = [&](const std::string& name) { return linear(*f.FindTensor(name)); };
  m->token_embd_ = f.FindTensor("token_embd.weight");
  m->output_norm_ = f32("output_norm.weight");
  DLLM_ASSIGN_OR_RETURN(m->output_,
                        named(f.FindTensor("output.weight") ? "output.weight" : "token_embd.weight"));
  m->layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    LayerWeights& w = m->layers_[static_cast<size_t>(l)];
    w.attn_norm = f32(p + "attn_norm.weight");
    w.ffn_norm = f32(p + "ffn_norm.weight");
    w.bq = f32(p + "attn_q.bias");
    w.bk = f32(p + "attn_k.bias");
    w.bv = f32(p + "attn_v.bias");
    w.q_norm = f32(p + "attn_q_norm.weight");
    w.k_norm = f32(p + "attn_k_norm.weight");
    DLLM_ASSIGN_OR_RETURN(w.wq, named(p + "attn_q.weight"));
    DLLM_ASSIGN_OR_RETURN(w.wk, named(p + "attn_k.weight"));
    DLLM_ASSIGN_OR_RETURN(w.wv, named(p + "attn_v.weight"));
    DLLM_ASSIGN_OR_RETURN(w.wo, named(p + "attn_output.weight"));
    if (!c.moe()) {
      DLLM_ASSIGN_OR_RETURN(w.gate, named(p + "ffn_gate.weight"));
      DLLM_ASSIGN_OR_RETURN(w.up, named(p + "ffn_up.weight"));
      DLLM_ASSIGN_OR_RETURN(w.down, named(p + "ffn_down.weight"));
      continue;
    }
    DLLM_ASSIGN_OR_RETURN(w.router, named(p + "ffn_gate_inp.weight"));
    const GgufTensor& gate = *f.FindTensor(p + "ffn_gate_exps.weight");
    const GgufTensor& up = *f.FindTensor(p + "ffn_up_exps.weight");
    const GgufTensor& down = *f.FindTensor(p + "ffn_down_exps.weight");
    w.experts.resize(static_cast<size_t>(c.n_expert));
    for (int64_t e = 0; e < c.n_expert; ++e) {
      ExpertWeights& x = w.experts[static_cast<size_t>(e)];
      DLLM_ASSIGN_OR_RETURN(x.gate, linear(ExpertSlice(gate, e)));
      DLLM_ASSIGN_OR_RETURN(x.up, linear(ExpertSlice(up, e)));
      DLLM_ASSIGN_OR_RETURN(x.down, linear(ExpertSlice(down, e)));
    }
  }
  // What is still read from the file (metadata, token_embd, norms, biases,
  // float weights) is copied into memory the model owns and the rest of the
  // mapping let go: a served file truncated or overwritten later can neither
  // crash the process (SIGBUS) nor change its answers (issue #25 N4).
  m->file_bytes_kept_ = f.file_size();
  for (const MappedFile::Range& r : repacked) m->file_bytes_kept_ -= r.bytes;
  DLLM_RETURN_IF_ERROR(m->file_.DetachFromFile(std::move(repacked)));
  return std::shared_ptr<const Model>(std::move(m));
}

}  // namespace dllm
