#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/base/status_macros.h"
#include "engine/model/tensor_layout.h"

namespace dllm {
namespace {

// Largest size any hyperparameter may claim; protects the buffer arithmetic.
constexpr int64_t kMaxDim = int64_t{1} << 24;

absl::Status Invalid(const GgufFile& f, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("gguf: ", f.path(), ": ", what));
}

// A size per layer: a scalar key holds for every layer, an array key (what
// some converters write, e.g. head_count_kv) gives one per layer and must
// have `n_layer` entries. Absent: `fallback` for every layer.
absl::StatusOr<std::vector<int64_t>> ReadLayerDims(const GgufFile& f, const std::string& key,
                                                   int64_t n_layer,
                                                   std::optional<int64_t> fallback = std::nullopt) {
  if (!f.HasKey(key) && fallback)
    return std::vector<int64_t>(static_cast<size_t>(n_layer), *fallback);
  if (const GgufValue* v = f.FindValue(key); v && v->type == GgufValueType::kArray) {
    DLLM_ASSIGN_OR_RETURN(std::vector<int64_t> values, f.GetIntArray(key));
    if (static_cast<int64_t>(values.size()) != n_layer) {
      return Invalid(f, absl::StrCat("key '", key, "' is an array of ", values.size(),
                                     " entries; expected one per layer (", n_layer, ")"));
    }
    for (size_t l = 0; l < values.size(); ++l) {
      if (values[l] < 1 || values[l] > kMaxDim) {
        return Invalid(f, absl::StrCat("key '", key, "'[", l, "] = ", values[l],
                                       " is out of range [1, ", kMaxDim, "]"));
      }
    }
    return values;
  }
  DLLM_ASSIGN_OR_RETURN(uint64_t value, f.GetUint(key));
  if (value < 1 || value > static_cast<uint64_t>(kMaxDim)) {
    return Invalid(
        f, absl::StrCat("key '", key, "' = ", value, " is out of range [1, ", kMaxDim, "]"));
  }
  return std::vector<int64_t>(static_cast<size_t>(n_layer), static_cast<int64_t>(value));
}

// A size every layer shares: a scalar, or an array whose entries agree.
absl::StatusOr<int64_t> ReadDim(const GgufFile& f, const std::string& key,
                                std::optional<int64_t> fallback = std::nullopt) {
  if (!f.HasKey(key) && fallback) return *fallback;
  const GgufValue* v = f.FindValue(key);
  const int64_t n = v && v->type == GgufValueType::kArray ? static_cast<int64_t>(v->count) : 1;
  if (n == 0) return Invalid(f, absl::StrCat("key '", key, "' is an empty array"));
  DLLM_ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadLayerDims(f, key, n));
  for (int64_t x : values) {
    if (x != values[0]) {
      return absl::UnimplementedError(
          absl::StrCat("gguf: ", f.path(), ": key '", key, "' varies per layer; not supported"));
    }
  }
  return values[0];
}

// expert_count, expert_used_count and the expert FFN width, checked
// against each other (llama.cpp asserts both counts are positive).
absl::Status ReadExperts(const GgufFile& f, const std::string& a, ModelConfig* c) {
  DLLM_ASSIGN_OR_RETURN(c->n_expert, ReadDim(f, a + ".expert_count"));
  DLLM_ASSIGN_OR_RETURN(c->n_expert_used, ReadDim(f, a + ".expert_used_count"));
  if (c->n_expert_used > c->n_expert) {
    return Invalid(f, absl::StrCat("key '", a, ".expert_used_count' = ", c->n_expert_used,
                                   " exceeds '", a, ".expert_count' = ", c->n_expert));
  }
  if (c->n_expert > 4096) {
    return Invalid(f, absl::StrCat("key '", a, ".expert_count' = ", c->n_expert,
                                   " is out of range [1, 4096]"));
  }
  const std::string exp_key = a + ".expert_feed_forward_length";
  if (f.HasKey(exp_key)) {
    DLLM_ASSIGN_OR_RETURN(c->n_ff_exp, ReadDim(f, exp_key));
    DLLM_ASSIGN_OR_RETURN(c->n_ff, ReadDim(f, a + ".feed_forward_length", c->n_ff_exp));
  } else {
    DLLM_ASSIGN_OR_RETURN(c->n_ff, ReadDim(f, a + ".feed_forward_length"));
    c->n_ff_exp = c->n_ff / c->n_expert_used;
    if (c->n_ff_exp < 1) {
      return Invalid(f, absl::StrCat("no key '", exp_key, "', and feed_forward_length ", c->n_ff,
                                     " / expert_used_count ", c->n_expert_used, " is 0"));
    }
  }
  // llama.cpp switches on group-limited routing past one group; dllm
  // reads the groups for LLaDA2 only (ReadLingMoe).
  if (!c->traits().ling_moe && f.HasKey(a + ".expert_group_count")) {
    DLLM_ASSIGN_OR_RETURN(uint64_t groups, f.GetUint(a + ".expert_group_count"));
    if (groups > 1) {
      return absl::UnimplementedError(absl::StrCat("gguf: ", f.path(), ": key '", a,
                                                   ".expert_group_count' = ", groups,
                                                   " (group-limited routing) is not supported"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<LayerConfig> UniformLayers(const ModelConfig& c) {
  const ArchTraits& arch = c.traits();
  LayerConfig layer;
  layer.n_head = c.n_head;
  layer.n_head_kv = c.n_head_kv;
  layer.head_dim = c.head_dim;
  layer.rope = 0;
  layer.attn_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  layer.qkv_bias = arch.qkv_bias;
  layer.qk_norm = arch.qk_norm;
  if (arch.moe) {
    layer.ffn = FfnKind::kMoe;
    layer.n_ff_expert = c.n_ff_exp;
    layer.n_expert = c.n_expert;
    layer.n_expert_used = c.n_expert_used;
    layer.moe_norm_weights = arch.moe_norm_weights;
  } else {
    layer.ffn = FfnKind::kSwiGlu;
    layer.n_ff = c.n_ff;
  }
  return std::vector<LayerConfig>(static_cast<size_t>(c.n_layer), layer);
}

// One row per architecture; the order is that of `Arch`.
constexpr ArchTraits kArchTraits[] = {
    // arch, name, rope, qkv_bias, qk_norm, moe, moe_norm_weights, output_required, q_is_n_embd,
    // sliding_window, gemma, ling_moe
    {Arch::kLlada, "llada", RopeType::kNorm, false, false, false, false, false, false, false, false,
     false},
    {Arch::kDream, "dream", RopeType::kNeox, true, false, false, false, false, true, false, false,
     false},
    {Arch::kLladaMoe, "llada-moe", RopeType::kNeox, true, true, true, false, true, true, false,
     false, false},
    {Arch::kRnd1, "rnd1", RopeType::kNeox, true, true, true, true, false, false, false, false,
     false},
    {Arch::kDiffusionGemma, "diffusion-gemma", RopeType::kNeox, false, true, true, true, false,
     false, true, true, false},
    // moe_norm_weights is the file's expert_weights_norm (ReadLingMoe).
    {Arch::kLlada2, "llada2", RopeType::kNeox, false, true, true, true, true, true, false, false,
     true},
};
const ArchTraits& TraitsOf(Arch arch) { return kArchTraits[static_cast<int>(arch)]; }

absl::string_view ArchName(Arch arch) { return TraitsOf(arch).name; }

std::optional<Arch> ParseArch(absl::string_view name) {
  for (const ArchTraits& t : kArchTraits) {
    if (name == t.name) return t.arch;
  }
  return std::nullopt;
}

const char* SupportedArchNames() {
  return "llada, dream, llada-moe, rnd1, diffusion-gemma, llada2";
}

absl::string_view AttentionKindName(AttentionKind kind) {
  return kind == AttentionKind::kGlobal ? "global" : "sliding";
}

absl::string_view FfnKindName(FfnKind kind) {
  switch (kind) {
    case FfnKind::kSwiGlu:
      return "swiglu";
    case FfnKind::kMoe:
      return "moe";
    case FfnKind::kGeGluMoe:
      return "geglu-moe";
  }
  return "?";
}

namespace {

template <typename Width>
int64_t MaxOver(const std::vector<LayerConfig>& layers, Width width) {
  int64_t most = 0;
  for (const LayerConfig& l : layers) most = std::max(most, width(l));
  return most;
}

// Weights one token reads in `l` with `experts` of its experts (all of a
// dense FFN).
int64_t LayerParams(const LayerConfig& l, int64_t n_embd, int64_t experts) {
  const int64_t attention =
      n_embd * (l.q_dim() + (l.value_is_key ? 1 : 2) * l.kv_dim()) + l.q_dim() * n_embd;
  // The dense FFN (n_ff 0 where there is none) and the shared expert, the
  // router and the experts.
  const int64_t dense = 3 * n_embd * (l.n_ff + l.n_ff_shared);
  const int64_t routed =
      l.n_expert > 0 ? n_embd * l.n_expert + 3 * n_embd * l.n_ff_expert * experts : 0;
  return attention + dense + routed;
}

}  // namespace

int64_t ModelConfig::max_q_dim() const {
  return MaxOver(layers, [](const LayerConfig& l) { return l.q_dim(); });
}
int64_t ModelConfig::max_kv_dim() const {
  return MaxOver(layers, [](const LayerConfig& l) { return l.kv_dim(); });
}
int64_t ModelConfig::max_head_dim() const {
  return MaxOver(layers, [](const LayerConfig& l) { return l.head_dim; });
}
int64_t ModelConfig::max_ffn_width() const {
  return MaxOver(layers, [](const LayerConfig& l) {
    return std::max({l.n_ff, l.n_ff_expert, l.n_ff_shared});
  });
}

int64_t ModelConfig::kv_floats_per_position() const {
  int64_t n = 0;
  for (const LayerConfig& l : layers) n += l.kv_dim();
  return n;
}

int64_t ModelConfig::active_layer_params() const {
  int64_t n = 0;
  for (const LayerConfig& l : layers) n += LayerParams(l, n_embd, l.n_expert_used);
  return n;
}

int64_t ModelConfig::layer_params() const {
  int64_t n = 0;
  for (const LayerConfig& l : layers) n += LayerParams(l, n_embd, l.n_expert);
  return n;
}

absl::string_view RopeTypeName(RopeType type) { return type == RopeType::kNorm ? "norm" : "neox"; }

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& f) {
  ModelConfig c;
  DLLM_ASSIGN_OR_RETURN(absl::string_view arch_name, f.GetString("general.architecture"));
  const std::optional<Arch> arch = ParseArch(arch_name);
  if (!arch) {
    return absl::UnimplementedError(
        absl::StrCat("gguf: ", f.path(), ": architecture '", arch_name,
                     "' is not supported (supported: ", SupportedArchNames(), ")"));
  }
  c.arch = *arch;
  const std::string a(arch_name);
  DLLM_ASSIGN_OR_RETURN(absl::string_view name, f.GetStringOr("general.name", ""));
  c.name = std::string(name);
  DLLM_ASSIGN_OR_RETURN(c.n_layer, ReadDim(f, a + ".block_count"));
  // Every layer has several tensors of its own: a count past the file's
  // tensors is a corrupt header, refused before anything is sized by it
  // (the layout check lists a dozen expected tensors per layer).
  if (c.n_layer > static_cast<int64_t>(f.tensors().size())) {
    return Invalid(f, absl::StrCat("key '", a, ".block_count' = ", c.n_layer, " exceeds the ",
                                   f.tensors().size(), " tensors in the file"));
  }
  DLLM_ASSIGN_OR_RETURN(c.n_embd, ReadDim(f, a + ".embedding_length"));
  DLLM_ASSIGN_OR_RETURN(c.n_head, ReadDim(f, a + ".attention.head_count"));
  DLLM_ASSIGN_OR_RETURN(const std::vector<int64_t> head_count_kv,
                        ReadLayerDims(f, a + ".attention.head_count_kv", c.n_layer, c.n_head));
  c.n_head_kv = *std::max_element(head_count_kv.begin(), head_count_kv.end());
  // MoE files may omit the dense width: it only backs expert_feed_forward_length.
  if (c.traits().moe) {
    DLLM_RETURN_IF_ERROR(ReadExperts(f, a, &c));
  } else {
    DLLM_ASSIGN_OR_RETURN(c.n_ff, ReadDim(f, a + ".feed_forward_length"));
  }
  DLLM_ASSIGN_OR_RETURN(c.n_ctx_train, ReadDim(f, a + ".context_length"));
  if (!f.HasKey(a + ".attention.key_length") && c.n_embd % c.n_head != 0) {
    return Invalid(f,
                   absl::StrCat("embedding_length ", c.n_embd, " is not a multiple of head_count ",
                                c.n_head, " (and no attention.key_length)"));
  }
  DLLM_ASSIGN_OR_RETURN(c.head_dim, ReadDim(f, a + ".attention.key_length", c.n_embd / c.n_head));
  DLLM_ASSIGN_OR_RETURN(int64_t value_dim, ReadDim(f, a + ".attention.value_length", c.head_dim));
  if (value_dim != c.head_dim) {
    return absl::UnimplementedError(absl::StrCat("gguf: ", f.path(), ": value_length ", value_dim,
                                                 " != key_length ", c.head_dim));
  }
  for (size_t l = 0; l < head_count_kv.size(); ++l) {
    if (c.n_head % head_count_kv[l] != 0) {
      return Invalid(f, absl::StrCat("head_count ", c.n_head, " is not a multiple of layer ", l,
                                     "'s head_count_kv ", head_count_kv[l]));
    }
  }
  if (c.head_dim % 2 != 0) return Invalid(f, absl::StrCat("head dim ", c.head_dim, " is odd"));
  // Partial RoPE (LLaDA2 turns half of each head) rotates the first n_rot.
  DLLM_ASSIGN_OR_RETURN(const int64_t n_rot, ReadDim(f, a + ".rope.dimension_count", c.head_dim));
  if (n_rot % 2 != 0 || n_rot > c.head_dim) {
    return Invalid(f, absl::StrCat("rope.dimension_count ", n_rot,
                                   " is odd or exceeds the head dim ", c.head_dim));
  }
  c.rope_type = c.traits().rope;
  DLLM_ASSIGN_OR_RETURN(c.rope_theta, f.GetFloatOr(a + ".rope.freq_base", 10000.0));
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) {
    return Invalid(f, absl::StrCat("rope.freq_base ", c.rope_theta, " is not positive"));
  }
  DLLM_ASSIGN_OR_RETURN(c.rms_eps, f.GetFloat(a + ".attention.layer_norm_rms_epsilon"));
  if (!(c.rms_eps > 0) || !(c.rms_eps < 1)) {
    return Invalid(f, absl::StrCat("layer_norm_rms_epsilon ", c.rms_eps, " not in (0, 1)"));
  }
  // llama-diffusion-cli defaults a missing key to true; LLaDA's converter
  // writes false.
  DLLM_ASSIGN_OR_RETURN(c.shift_logits, f.GetBoolOr("diffusion.shift_logits", true));

  const GgufTensor* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) return Invalid(f, "missing tensor 'token_embd.weight'");
  if (embd->n_dims != 2 || embd->ne[0] != c.n_embd) {
    return Invalid(f, absl::StrCat("tensor 'token_embd.weight' has shape ", embd->ShapeString(),
                                   ", expected [", c.n_embd, ", n_vocab]"));
  }
  c.n_vocab = embd->ne[1];
  if (c.n_vocab < 1) return Invalid(f, "tensor 'token_embd.weight' has no rows (n_vocab 0)");
  // Optional; when present it must agree with the embedding (a file saying
  // vocab_size 0 loaded before).
  if (f.HasKey(a + ".vocab_size")) {
    DLLM_ASSIGN_OR_RETURN(const uint64_t vocab_size, f.GetUint(a + ".vocab_size"));
    if (vocab_size != static_cast<uint64_t>(c.n_vocab)) {
      return Invalid(f, absl::StrCat(a, ".vocab_size ", vocab_size, " disagrees with the ",
                                     c.n_vocab, " rows of 'token_embd.weight'"));
    }
  }
  c.tied_output = f.FindTensor("output.weight") == nullptr;

  DLLM_ASSIGN_OR_RETURN(absl::string_view tok_model, f.GetStringOr("tokenizer.ggml.model", ""));
  DLLM_ASSIGN_OR_RETURN(absl::string_view tok_pre, f.GetStringOr("tokenizer.ggml.pre", ""));
  c.tokenizer_model = std::string(tok_model);
  c.tokenizer_pre = std::string(tok_pre);
  c.has_chat_template = f.HasKey("tokenizer.chat_template");
  // Checked against the embedding rows here; the tokenizer checks the same
  // ids against its token list.
  DLLM_ASSIGN_OR_RETURN(c.tokens, ReadSpecialTokens(f, c.n_vocab));
  if (c.traits().gemma) {
    // Its layers' RoPE comes from their own keys (ReadGemmaLayers).
    if (n_rot != c.head_dim) {
      return absl::UnimplementedError(absl::StrCat("gguf: ", f.path(), ": rope.dimension_count ",
                                                   n_rot, " != head dim ", c.head_dim));
    }
    DLLM_RETURN_IF_ERROR(ReadGemmaLayers(f, head_count_kv, &c));
    return c;
  }
  // The other architectures have one kind of layer; head_count_kv may
  // still vary per layer.
  c.ropes = {RopeSpec{c.rope_type, c.rope_theta, n_rot, {}}};
  c.layers = UniformLayers(c);
  for (size_t l = 0; l < c.layers.size(); ++l) c.layers[l].n_head_kv = head_count_kv[l];
  if (c.traits().sliding_window) DLLM_RETURN_IF_ERROR(ReadSlidingLayers(f, &c));
  if (c.traits().ling_moe) DLLM_RETURN_IF_ERROR(ReadLingMoe(f, &c));
  return c;
}

namespace {

// rope_freqs.weight: one F32 factor per rotated pair of a global head.
absl::StatusOr<std::vector<float>> ReadRopeFreqs(const GgufFile& f, int64_t pairs) {
  constexpr const char* kName = kRopeFreqsTensor;
  const GgufTensor* t = f.FindTensor(kName);
  if (t == nullptr) {
    return Invalid(f, absl::StrCat("missing tensor '", kName,
                                   "' (the global layers' RoPE frequency factors)"));
  }
  if (t->n_dims != 1 || t->ne[0] != pairs || t->type != GgmlType::kF32) {
    return Invalid(
        f, absl::StrCat("tensor '", kName, "' is ", GgmlTypeName(t->type), " ", t->ShapeString(),
                        "; expected F32 [", pairs, "] (half the global head dim)"));
  }
  std::vector<float> factors(static_cast<size_t>(pairs));
  std::memcpy(factors.data(), t->data, sizeof(float) * factors.size());
  for (size_t i = 0; i < factors.size(); ++i) {
    if (!(factors[i] > 0) || !std::isfinite(factors[i])) {
      return Invalid(f, absl::StrCat("tensor '", kName, "'[", i, "] = ", factors[i],
                                     " is not a positive finite factor"));
    }
  }
  return factors;
}

// A sliding layer's RoPE: plain, over rope.dimension_count_swa dims.
absl::StatusOr<RopeSpec> ReadSlidingRope(const GgufFile& f, const std::string& a, RopeType type,
                                         int64_t head_dim) {
  RopeSpec spec;
  spec.type = type;
  DLLM_ASSIGN_OR_RETURN(spec.dims, ReadDim(f, a + ".rope.dimension_count_swa", head_dim));
  if (spec.dims % 2 != 0 || spec.dims > head_dim) {
    return Invalid(f, absl::StrCat("rope.dimension_count_swa ", spec.dims,
                                   " is odd or exceeds the sliding head dim ", head_dim));
  }
  DLLM_ASSIGN_OR_RETURN(spec.theta, f.GetFloatOr(a + ".rope.freq_base_swa", 10000.0));
  if (!(spec.theta > 0) || !std::isfinite(spec.theta)) {
    return Invalid(f, absl::StrCat("rope.freq_base_swa ", spec.theta, " is not positive"));
  }
  return spec;
}

constexpr const char* kSelfConditioningTensors[] = {kSelfCondPreNormTensor, kSelfCondGateTensor,
                                                    kSelfCondUpTensor, kSelfCondDownTensor};

}  // namespace

LayerConfig GemmaBaseLayer(const ModelConfig& c) {
  LayerConfig layer;
  layer.n_head = c.n_head;
  layer.attn_scale = 1.0f;  // the reference's f_attention_scale: no 1/sqrt(head_dim)
  layer.qk_norm = true;
  layer.value_norm = true;
  layer.post_norms = true;
  layer.output_scales = true;
  layer.ffn = FfnKind::kGeGluMoe;
  layer.n_ff = c.n_ff;
  layer.n_ff_expert = c.n_ff_exp;
  layer.n_expert = c.n_expert;
  layer.n_expert_used = c.n_expert_used;
  layer.moe_norm_weights = true;
  return layer;
}

void ShapeGemmaLayers(int64_t swa_head_dim, std::span<const int64_t> head_count_kv,
                      const std::vector<bool>& value_is_key, ModelConfig* c) {
  for (size_t l = 0; l < c->layers.size(); ++l) {
    LayerConfig& lc = c->layers[l];
    const bool slides = lc.attention == AttentionKind::kSliding;
    lc.n_head_kv = head_count_kv[l];
    lc.head_dim = slides ? swa_head_dim : c->head_dim;
    lc.rope = slides ? 1 : 0;
    lc.value_is_key = value_is_key[l];
  }
}

absl::Status ReadGemmaLayers(const GgufFile& f, std::vector<int64_t> head_count_kv,
                             ModelConfig* c) {
  const std::string a(ArchName(c->arch));
  // The reference requires the pattern (a per-layer array, or a scalar for
  // every layer); ReadSlidingLayers reads both forms.
  if (!f.HasKey(a + ".attention.sliding_window_pattern")) {
    return Invalid(f, absl::StrCat("missing key '", a, ".attention.sliding_window_pattern'"));
  }
  DLLM_ASSIGN_OR_RETURN(const int64_t swa_head_dim, ReadDim(f, a + ".attention.key_length_swa"));
  DLLM_ASSIGN_OR_RETURN(const int64_t swa_value_dim,
                        ReadDim(f, a + ".attention.value_length_swa", swa_head_dim));
  if (swa_value_dim != swa_head_dim || swa_head_dim % 2 != 0) {
    return Invalid(
        f, absl::StrCat("attention.value_length_swa ", swa_value_dim, " must equal key_length_swa ",
                        swa_head_dim, ", an even head dim"));
  }
  RopeSpec global{c->rope_type, c->rope_theta, c->head_dim, {}};
  DLLM_ASSIGN_OR_RETURN(const RopeSpec sliding, ReadSlidingRope(f, a, c->rope_type, swa_head_dim));

  c->layers.assign(static_cast<size_t>(c->n_layer), GemmaBaseLayer(*c));
  DLLM_RETURN_IF_ERROR(ReadSlidingLayers(f, c));
  std::vector<bool> value_is_key(c->layers.size());
  for (size_t l = 0; l < c->layers.size(); ++l) {
    value_is_key[l] = f.FindTensor(absl::StrCat("blk.", l, ".attn_v.weight")) == nullptr;
  }
  ShapeGemmaLayers(swa_head_dim, head_count_kv, value_is_key, c);
  const bool any_global = std::any_of(c->layers.begin(), c->layers.end(), [](const LayerConfig& l) {
    return l.attention == AttentionKind::kGlobal;
  });
  if (any_global) {
    DLLM_ASSIGN_OR_RETURN(global.freq_factors, ReadRopeFreqs(f, c->head_dim / 2));
  }
  c->ropes = {std::move(global), sliding};

  c->shift_logits = false;  // a canvas model's row p is position p's
  c->embed_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->canvas_input_norm = true;
  // The reference's default when the key is absent is 30, not off.
  DLLM_ASSIGN_OR_RETURN(const double softcap, f.GetFloatOr(a + ".final_logit_softcapping", 30.0));
  if (!(softcap >= 0) || !std::isfinite(softcap)) {
    return Invalid(f, absl::StrCat("final_logit_softcapping ", softcap, " is not >= 0"));
  }
  c->logit_softcap = static_cast<float>(softcap);
  int present = 0;
  for (const char* name : kSelfConditioningTensors) present += f.FindTensor(name) != nullptr;
  if (present != 0 && present != 4) {
    return Invalid(f,
                   "the self-conditioning tensors (self_cond_{pre_norm,gate,up,down}.weight) "
                   "are only partly present");
  }
  c->self_conditioning = present == 4;
  if (!f.HasKey("diffusion.canvas_length")) {
    return Invalid(f,
                   "missing key 'diffusion.canvas_length' (the canvas an entropy-bound "
                   "model denoises)");
  }
  DLLM_ASSIGN_OR_RETURN(const uint64_t canvas, f.GetUint("diffusion.canvas_length"));
  if (canvas < 1 || canvas >= static_cast<uint64_t>(c->n_ctx_train)) {
    return Invalid(f, absl::StrCat("diffusion.canvas_length ", canvas, " is outside [1, ",
                                   c->n_ctx_train, ") (context_length, less a prompt token)"));
  }
  c->canvas_length = static_cast<int64_t>(canvas);
  // The end-of-generation tokens llama.cpp's vocabulary marks by their
  // text for this family (a canvas is trimmed at the first).
  constexpr const char* kGemmaStopTexts[] = {"<eos>", "<end_of_turn>", "<turn|>",
                                             "<|tool_response>"};
  return MarkStopTexts(f, kGemmaStopTexts, &c->tokens);
}

absl::Status ReadSlidingLayers(const GgufFile& f, ModelConfig* c) {
  const std::string a(ArchName(c->arch));
  const std::string pattern_key = a + ".attention.sliding_window_pattern";
  const GgufValue* pattern = f.FindValue(pattern_key);
  if (pattern == nullptr) return absl::OkStatus();
  const int64_t n_layer = static_cast<int64_t>(c->layers.size());
  std::vector<bool> sliding(static_cast<size_t>(n_layer), false);
  if (pattern->type == GgufValueType::kArray) {
    if (static_cast<int64_t>(pattern->count) != n_layer) {
      return Invalid(f, absl::StrCat("key '", pattern_key, "' is an array of ", pattern->count,
                                     " entries; expected one per layer (", n_layer, ")"));
    }
    if (GgufValueTypeBytes(pattern->elem_type) == 0) {
      return Invalid(f, absl::StrCat("key '", pattern_key, "' is not an array of numbers"));
    }
    for (int64_t l = 0; l < n_layer; ++l) {
      sliding[static_cast<size_t>(l)] = GgufArrayInt(*pattern, static_cast<uint64_t>(l)) != 0;
    }
  } else {
    DLLM_ASSIGN_OR_RETURN(const uint64_t period, f.GetUint(pattern_key));
    for (int64_t l = 0; l < n_layer; ++l) {
      sliding[static_cast<size_t>(l)] =
          period == 0 || static_cast<uint64_t>(l) % period < period - 1;
    }
  }
  if (std::none_of(sliding.begin(), sliding.end(), [](bool s) { return s; })) {
    return absl::OkStatus();
  }
  DLLM_ASSIGN_OR_RETURN(const int64_t window, ReadDim(f, a + ".attention.sliding_window"));
  for (size_t l = 0; l < sliding.size(); ++l) {
    if (!sliding[l]) continue;
    c->layers[l].attention = AttentionKind::kSliding;
    c->layers[l].window = static_cast<int32_t>(window);
  }
  return absl::OkStatus();
}

void ShapeLingLayers(const LingMoe& moe, ModelConfig* c) {
  for (int64_t l = 0; l < c->n_layer; ++l) {
    LayerConfig& layer = c->layers[static_cast<size_t>(l)];
    layer.fused_qkv = true;
    if (l < moe.dense_layers) {
      layer.ffn = FfnKind::kSwiGlu;
      layer.n_ff = c->n_ff;
      layer.n_ff_expert = layer.n_expert = layer.n_expert_used = 0;
      continue;
    }
    layer.router_score = moe.router_score;
    layer.n_expert_groups = moe.groups;
    layer.n_expert_groups_used = moe.groups_used;
    layer.moe_norm_weights = moe.norm_weights;
    layer.moe_weights_scale = moe.weights_scale;
    layer.n_ff_shared = moe.n_ff_shared;
  }
}

absl::Status ReadLingMoe(const GgufFile& f, ModelConfig* c) {
  const std::string a(ArchName(c->arch));
  DLLM_ASSIGN_OR_RETURN(const uint64_t gating, f.GetUint(a + ".expert_gating_func"));
  // llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE: 1 softmax, 2 sigmoid.
  if (gating != 1 && gating != 2) {
    return Invalid(f, absl::StrCat("key '", a, ".expert_gating_func' = ", gating,
                                   " (1: softmax, 2: sigmoid)"));
  }
  DLLM_ASSIGN_OR_RETURN(const uint64_t dense, f.GetUint(a + ".leading_dense_block_count"));
  if (dense > static_cast<uint64_t>(c->n_layer)) {
    return Invalid(f, absl::StrCat("key '", a, ".leading_dense_block_count' = ", dense,
                                   " exceeds block_count ", c->n_layer));
  }
  DLLM_ASSIGN_OR_RETURN(const uint64_t groups, f.GetUintOr(a + ".expert_group_count", 1));
  DLLM_ASSIGN_OR_RETURN(const uint64_t groups_used,
                        f.GetUintOr(a + ".expert_group_used_count", groups));
  if (groups < 1 || static_cast<int64_t>(groups) > c->n_expert ||
      c->n_expert % static_cast<int64_t>(groups) != 0) {
    return Invalid(f, absl::StrCat("key '", a, ".expert_group_count' = ", groups,
                                   " does not divide expert_count ", c->n_expert, " into groups"));
  }
  if (groups_used < 1 || groups_used > groups) {
    return Invalid(f, absl::StrCat("key '", a, ".expert_group_used_count' = ", groups_used,
                                   " is outside [1, expert_group_count ", groups, "]"));
  }
  // Each kept group offers its experts; together they must cover top-k (and
  // a group is scored by its two best, so it needs two).
  const int64_t per_group = c->n_expert / static_cast<int64_t>(groups);
  if (groups > 1 &&
      (per_group < 2 || static_cast<int64_t>(groups_used) * per_group < c->n_expert_used)) {
    return Invalid(
        f, absl::StrCat("expert groups of ", per_group, " (", a, ".expert_group_count ", groups,
                        ", ", groups_used, " used) cannot offer expert_used_count ",
                        c->n_expert_used, " experts"));
  }
  DLLM_ASSIGN_OR_RETURN(const double scale, f.GetFloatOr(a + ".expert_weights_scale", 1.0));
  if (!(scale > 0) || !std::isfinite(scale)) {
    return Invalid(
        f, absl::StrCat("key '", a, ".expert_weights_scale' = ", scale, " is not positive"));
  }
  DLLM_ASSIGN_OR_RETURN(const bool norm, f.GetBoolOr(a + ".expert_weights_norm", false));
  DLLM_ASSIGN_OR_RETURN(const uint64_t shared, f.GetUintOr(a + ".expert_shared_count", 0));
  int64_t n_ff_shared = 0;
  if (shared > 0) {
    DLLM_ASSIGN_OR_RETURN(n_ff_shared, ReadDim(f, a + ".expert_shared_feed_forward_length",
                                               c->n_ff_exp * static_cast<int64_t>(shared)));
  }
  ShapeLingLayers(
      {static_cast<int64_t>(dense), gating == 2 ? RouterScore::kSigmoid : RouterScore::kSoftmax,
       static_cast<int64_t>(groups), static_cast<int64_t>(groups_used), norm,
       static_cast<float>(scale), n_ff_shared},
      c);
  // Not a key of the fork's converter; a file may carry its own.
  DLLM_ASSIGN_OR_RETURN(const uint64_t block, f.GetUintOr("diffusion.block_length", 32));
  if (block < 1 || block >= static_cast<uint64_t>(c->n_ctx_train)) {
    return Invalid(f, absl::StrCat("diffusion.block_length ", block, " is outside [1, ",
                                   c->n_ctx_train, ") (context_length)"));
  }
  c->block_length = static_cast<int64_t>(block);
  return absl::OkStatus();
}

}  // namespace dllm
