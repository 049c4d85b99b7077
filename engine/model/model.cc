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

}  // namespace

absl::StatusOr<std::shared_ptr<const Model>> Model::Load(const std::string& path,
                                                         const ModelOptions& options) {
  DLLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  std::shared_ptr<Model> m(new Model(std::move(file)));
  m->options_ = options;
  DLLM_ASSIGN_OR_RETURN(m->config_, ModelConfigFromGguf(m->file_));
  DLLM_RETURN_IF_ERROR(CheckCompatible(m->file_, m->config_));

  const GgufFile& f = m->file_;
  absl::StatusOr<BpeTokenizer> tokenizer = BpeTokenizer::FromGguf(f);
  if (!tokenizer.ok()) return WithPath(path, tokenizer.status());
  m->tokenizer_ = std::make_unique<BpeTokenizer>(std::move(*tokenizer));
  m->chat_template_ = DetectChatTemplate(f);
  auto f32 = [&f](const std::string& name) -> const float* {
    const GgufTensor* t = f.FindTensor(name);
    return t ? reinterpret_cast<const float*>(t->data) : nullptr;
  };
  // Repacked weights release their mapped pages, except token_embd, which
  // the embedding lookup keeps reading (also when it doubles as the head).
  auto linear = [&](const std::string& name) -> absl::StatusOr<std::unique_ptr<Linear>> {
    absl::StatusOr<Linear> l =
        Linear::Create(*f.FindTensor(name), options.isa, name != "token_embd.weight");
    if (!l.ok()) return WithPath(path, l.status());
    m->owned_weight_bytes_ += l->owned_bytes();
    return std::make_unique<Linear>(std::move(*l));
  };
  m->token_embd_ = f.FindTensor("token_embd.weight");
  m->output_norm_ = f32("output_norm.weight");
  DLLM_ASSIGN_OR_RETURN(m->output_,
                        linear(f.FindTensor("output.weight") ? "output.weight" : "token_embd.weight"));
  m->layers_.resize(static_cast<size_t>(m->config_.n_layer));
  for (int64_t l = 0; l < m->config_.n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    LayerWeights& w = m->layers_[static_cast<size_t>(l)];
    w.attn_norm = f32(p + "attn_norm.weight");
    w.ffn_norm = f32(p + "ffn_norm.weight");
    w.bq = f32(p + "attn_q.bias");
    w.bk = f32(p + "attn_k.bias");
    w.bv = f32(p + "attn_v.bias");
    DLLM_ASSIGN_OR_RETURN(w.wq, linear(p + "attn_q.weight"));
    DLLM_ASSIGN_OR_RETURN(w.wk, linear(p + "attn_k.weight"));
    DLLM_ASSIGN_OR_RETURN(w.wv, linear(p + "attn_v.weight"));
    DLLM_ASSIGN_OR_RETURN(w.wo, linear(p + "attn_output.weight"));
    DLLM_ASSIGN_OR_RETURN(w.gate, linear(p + "ffn_gate.weight"));
    DLLM_ASSIGN_OR_RETURN(w.up, linear(p + "ffn_up.weight"));
    DLLM_ASSIGN_OR_RETURN(w.down, linear(p + "ffn_down.weight"));
  }
  return std::shared_ptr<const Model>(std::move(m));
}

}  // namespace dllm
