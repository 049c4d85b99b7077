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

// Rows [begin, begin + count) of a 2-D tensor: rows are whole blocks, so
// each run of rows is a tensor over its own bytes.
GgufTensor RowRun(const GgufTensor& t, int64_t begin, int64_t count) {
  const uint64_t row_bytes = t.n_bytes / static_cast<uint64_t>(t.ne[1]);
  GgufTensor part = t;
  part.ne[1] = count;
  part.n_bytes = row_bytes * static_cast<uint64_t>(count);
  part.offset = t.offset + row_bytes * static_cast<uint64_t>(begin);
  part.data = t.data + row_bytes * static_cast<uint64_t>(begin);
  return part;
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
  // DiffusionGemma without a template of its own chats as Gemma 4 (its
  // family's template), not in llama.cpp's ChatML fallback.
  if (spec.config.traits().gemma && !f.HasKey("tokenizer.chat_template")) {
    spec.chat_template = *ParseChatTemplate("gemma4");
  }
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
    const bool release = t.name != kTokenEmbdTensor;
    absl::StatusOr<Linear> l = Linear::Create(t, options.isa, release);
    if (!l.ok()) return WithPath(path, l.status());
    if (release && l->int8()) repacked.push_back({f.data_offset() + t.offset, t.n_bytes});
    m->owned_weight_bytes_ += l->owned_bytes();
    return std::make_unique<Linear>(std::move(*l));
  };
  m->token_embd_ = f.FindTensor(kTokenEmbdTensor);
  m->output_norm_ = f32(kOutputNormTensor);
  DLLM_ASSIGN_OR_RETURN(
      m->output_,
      linear(*f.FindTensor(f.FindTensor(kOutputTensor) ? kOutputTensor : kTokenEmbdTensor)));
  if (c.self_conditioning) {
    SelfConditioningWeights& sc = m->self_conditioning_;
    sc.pre_norm = f32(kSelfCondPreNormTensor);
    DLLM_ASSIGN_OR_RETURN(sc.mlp.gate, linear(*f.FindTensor(kSelfCondGateTensor)));
    DLLM_ASSIGN_OR_RETURN(sc.mlp.up, linear(*f.FindTensor(kSelfCondUpTensor)));
    DLLM_ASSIGN_OR_RETURN(sc.mlp.down, linear(*f.FindTensor(kSelfCondDownTensor)));
  }
  m->layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = LayerPrefix(l);
    const LayerConfig& layer = c.layers[static_cast<size_t>(l)];
    LayerWeights& w = m->layers_[static_cast<size_t>(l)];
    w.moe.experts.resize(static_cast<size_t>(layer.n_expert));
    // CheckCompatible (in ReadModelSpec) has found every required tensor
    // with its shape; an optional one that is absent leaves its member null.
    for (const LayerTensor& t : LayerTensors(c, layer)) {
      const GgufTensor* tensor = f.FindTensor(prefix + t.suffix);
      if (tensor == nullptr) continue;
      if (t.vector != nullptr) {
        *t.vector(w) = reinterpret_cast<const float*>(tensor->data);
      } else if (t.matrix != nullptr) {
        DLLM_ASSIGN_OR_RETURN(*t.matrix(w), linear(*tensor));
      } else if (!t.cuts.empty()) {
        int64_t begin = 0;
        for (const RowCut& cut : t.cuts) {
          DLLM_ASSIGN_OR_RETURN(*cut.matrix(w), linear(RowRun(*tensor, begin, cut.rows)));
          begin += cut.rows;
        }
      } else {
        for (int64_t e = 0; e < layer.n_expert; ++e) {
          GatedFfnWeights& expert = w.moe.experts[static_cast<size_t>(e)];
          const GgufTensor slice = ExpertSlice(*tensor, e);
          if (t.expert_second == nullptr) {
            DLLM_ASSIGN_OR_RETURN(expert.*t.expert, linear(slice));
          } else {
            const int64_t half = slice.ne[1] / 2;
            DLLM_ASSIGN_OR_RETURN(expert.*t.expert, linear(RowRun(slice, 0, half)));
            DLLM_ASSIGN_OR_RETURN(expert.*t.expert_second, linear(RowRun(slice, half, half)));
          }
        }
      }
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
