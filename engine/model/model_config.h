// Hyperparameters and special tokens of a diffusion LM (LLaDA, Dream, the
// MoE models LLaDA-MoE and RND1, DiffusionGemma and LLaDA2), read from GGUF keys (`{arch}.*`,
// `tokenizer.ggml.*`). Plain structs; `ModelConfigFromGguf` is the only
// builder and validates what it reads. What differs between architectures
// lives in one table, `TraitsOf(Arch)`; what differs between the layers of
// one model (gemma.cpp's LayerConfig) in `ModelConfig::layers`, which the
// forward pass, the tensor list and the K/V cache read.
#ifndef DLLM_ENGINE_MODEL_MODEL_CONFIG_H_
#define DLLM_ENGINE_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/special_tokens.h"

namespace dllm {

enum class Arch { kLlada, kDream, kLladaMoe, kRnd1, kDiffusionGemma, kLlada2 };
// "llada", "dream", "llada-moe", "rnd1", "diffusion-gemma", "llada2"
absl::string_view ArchName(Arch arch);
std::optional<Arch> ParseArch(absl::string_view name);
// "llada, dream, llada-moe, rnd1, diffusion-gemma, llada2", for error messages.
const char* SupportedArchNames();

// How RoPE pairs dimensions: NORM rotates (x[2i], x[2i+1]) (LLaDA),
// NEOX rotates (x[i], x[i + head_dim/2]) (Dream and the MoE models).
enum class RopeType { kNorm, kNeox };
absl::string_view RopeTypeName(RopeType type);

// What an architecture's graph is made of, as the reference llama.cpp
// (src/models/{llada,dream,llada-moe,rnd1}.cpp; diffusion-gemma.cpp at the
// DiffusionGemma pin, docs/diffusion-gemma.md; llada2.cpp in the fork of
// llama.cpp PR #17454) builds it.
struct ArchTraits {
  Arch arch;
  const char* name;       // general.architecture
  RopeType rope;          // llama_model_rope_type()
  bool qkv_bias;          // optional attn_{q,k,v}.bias are read and added
  bool qk_norm;           // per-head RMSNorm of q and k before RoPE (attn_{q,k}_norm)
  bool moe;               // the FFN is a routed mixture of experts (ffn_*_exps)
  bool moe_norm_weights;  // top-k router weights renormalised to sum 1 (rnd1)
  bool output_required;   // output.weight must be present (no tied head)
  bool q_is_n_embd;       // attn_q is {n_embd, n_embd}: n_head * head_dim == n_embd
  bool sliding_window;    // layers may slide (ReadSlidingLayers reads which)
  // Gemma 4's layer and model (ReadGemmaLayers): per-kind head dims and
  // RoPE, V = K where attn_v is absent, the V norm, sandwich norms, the
  // dense GeGLU beside GeGLU experts, per-row-kind layer scalars, the
  // scaled embedding, self-conditioning and the logit softcap.
  bool gemma;
  // Ling 2.0's MoE (ReadLingMoe): leading dense layers, a fused attn_qkv,
  // sigmoid routing with an expert bias and expert groups, the routed
  // scale and a shared expert; the model is block-causal (LLaDA2).
  bool ling_moe;
};
const ArchTraits& TraitsOf(Arch arch);

// What defines a RoPE table: the pairing, the base and the rotated
// dimensions. Layers that share one share the table.
struct RopeSpec {
  RopeType type = RopeType::kNorm;
  double theta = 10000.0;
  // Rotated dimensions of a head, from the first (<= head_dim): pair i of
  // dims / 2 turns by pos * theta^(-2i / dims) / freq_factors[i].
  int64_t dims = 0;
  // rope_freqs.weight, one per pair (DiffusionGemma's global layers: 1 for
  // the pairs that turn, 1e30 for those that in effect do not); empty: 1.
  std::vector<float> freq_factors;
  friend bool operator==(const RopeSpec&, const RopeSpec&) = default;
};

// Which keys a layer's attention may read: every key the sequence's mask
// allows (global), or of those before the row's own region only the last
// `LayerConfig::window` - 1 (sliding; KeysOf in forward_batch.h).
enum class AttentionKind { kGlobal, kSliding };
// The layer's feed-forward network: a dense SwiGLU, or a routed mixture of
// SwiGLU experts with softmax gating, or (DiffusionGemma) a dense GeGLU
// beside routed GeGLU experts, each branch normed in and out, their sum
// normed again (forward.cc has a function for each).
enum class FfnKind { kSwiGlu, kMoe, kGeGluMoe };
// How a MoE router turns its logits into expert scores: a softmax over the
// experts (llada-moe, rnd1, DiffusionGemma), or each logit's sigmoid
// (LLaDA2; {arch}.expert_gating_func 2).
enum class RouterScore { kSoftmax, kSigmoid };
absl::string_view AttentionKindName(AttentionKind kind);  // "global", "sliding"
absl::string_view FfnKindName(FfnKind kind);              // "swiglu", "moe", "geglu-moe"

// One layer as the forward pass runs it.
struct LayerConfig {
  AttentionKind attention = AttentionKind::kGlobal;
  int32_t window = 0;  // kSliding: {arch}.attention.sliding_window
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int rope = 0;               // index into ModelConfig::ropes
  float attn_scale = 0;       // multiplies q.k: 1/sqrt(head_dim) (Gemma 4: 1)
  bool qkv_bias = false;      // optional attn_{q,k,v}.bias are read and added
  bool qk_norm = false;       // per-head RMSNorm of q and k before RoPE
  bool value_is_key = false;  // no attn_v: V is the K projection before its norm and RoPE
  bool value_norm = false;    // per-head RMSNorm of V without a weight (Gemma 4)
  // RMSNorm of the attention and of the FFN output before each residual
  // add (post_attention_norm, post_ffw_norm: Gemma's sandwich).
  bool post_norms = false;
  // The layer's output (after the residual) times a scalar by row kind:
  // enc_layer_output_scale on prompt rows, layer_output_scale on the rest.
  bool output_scales = false;
  FfnKind ffn = FfnKind::kSwiGlu;
  int64_t n_ff = 0;         // the dense FFN's hidden width (kSwiGlu, kGeGluMoe)
  int64_t n_ff_expert = 0;  // one expert's hidden width (kMoe, kGeGluMoe)
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  bool moe_norm_weights = false;  // top-k router weights renormalised to sum 1
  // LLaDA2's routing (defaults: softmax, one group, no scale, no shared
  // expert). The experts' scores choose them; an expert bias
  // (exp_probs_b.bias, optional) is added for the choice only. With groups,
  // experts split into n_expert_groups runs of consecutive experts, each
  // scored by the sum of its two best, and only the best
  // n_expert_groups_used groups' experts are eligible. The chosen scores
  // (renormalised when moe_norm_weights) times moe_weights_scale weight
  // the experts' outputs; a shared expert of n_ff_shared adds its own.
  RouterScore router_score = RouterScore::kSoftmax;
  int64_t n_expert_groups = 1;
  int64_t n_expert_groups_used = 1;
  float moe_weights_scale = 1.0f;
  int64_t n_ff_shared = 0;
  // The fused attn_qkv holds q, k and v's rows in that order (cut apart at load).
  bool fused_qkv = false;

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

struct ModelConfig {
  Arch arch = Arch::kLlada;
  std::string name;         // general.name, e.g. "LLaDA-8B-Instruct"
  int64_t n_layer = 0;      // {arch}.block_count, e.g. 32
  int64_t n_embd = 0;       // {arch}.embedding_length, e.g. 4096
  int64_t n_head = 0;       // {arch}.attention.head_count, e.g. 32
  int64_t n_head_kv = 0;    // {arch}.attention.head_count_kv (default n_head; an array's largest)
  int64_t head_dim = 0;     // {arch}.attention.key_length (default n_embd / n_head)
  int64_t n_ff = 0;         // {arch}.feed_forward_length, e.g. 12288 (dense FFN width)
  int64_t n_vocab = 0;      // rows of token_embd.weight
  int64_t n_ctx_train = 0;  // {arch}.context_length, e.g. 4096
  RopeType rope_type = RopeType::kNorm;
  double rope_theta = 10000.0;  // {arch}.rope.freq_base (llama.cpp's default 10000)
  double rms_eps = 1e-5;        // {arch}.attention.layer_norm_rms_epsilon
  // diffusion.shift_logits: position p is predicted by the output row p - 1
  // (Dream, RND1). llama-diffusion-cli's default when absent: true.
  bool shift_logits = false;
  bool tied_output = false;  // no output.weight: the head reuses token_embd

  // Mixture of experts (llada-moe, rnd1); 0 for dense models.
  int64_t n_expert = 0;       // {arch}.expert_count, e.g. 64
  int64_t n_expert_used = 0;  // {arch}.expert_used_count, e.g. 8 (top-k)
  // {arch}.expert_feed_forward_length, e.g. 1024; llama.cpp's fallback when
  // absent: feed_forward_length / expert_used_count.
  int64_t n_ff_exp = 0;

  // Tokenizer facts.
  std::string tokenizer_model;  // tokenizer.ggml.model, e.g. "gpt2"
  std::string tokenizer_pre;    // tokenizer.ggml.pre, e.g. "qwen2"
  bool has_chat_template = false;
  SpecialTokens tokens;

  // Model-wide parts of Gemma 4 (traits().gemma); the defaults are no-ops.
  float embed_scale = 1.0f;        // token embeddings times this (sqrt(n_embd))
  bool canvas_input_norm = false;  // canvas rows' inputs RMS-normed without weight
  float logit_softcap = 0;         // logits = c tanh(logits / c); 0: none
  // self_cond_* tensors: the previous step's logits feed the canvas rows'
  // inputs (SequenceInput::self_conditioning).
  bool self_conditioning = false;
  // diffusion.canvas_length: the positions one entropy-bound canvas holds
  // (0: a masked-diffusion model, whose canvas is what a request asks).
  int64_t canvas_length = 0;
  // A block-diffusion model (LLaDA2): attention is bidirectional within
  // blocks of this many positions, counted from position 0, and causal
  // across them (MaskKind::kBlockCausal). diffusion.block_length, else 32
  // (the official samplers' block_size); 0 for the other families.
  int64_t block_length = 0;

  // Every layer, built from the keys above and the per-layer arrays
  // (head_count_kv, feed_forward_length); `n_layer` of them.
  std::vector<LayerConfig> layers;
  // The distinct RoPE tables the layers read (LayerConfig::rope).
  std::vector<RopeSpec> ropes;

  const ArchTraits& traits() const { return TraitsOf(arch); }
  bool moe() const { return n_expert > 0; }
  // The widest any layer needs (what one set of activations is sized by).
  int64_t max_q_dim() const;
  int64_t max_kv_dim() const;
  int64_t max_head_dim() const;
  int64_t max_ffn_width() const;
  // K (or V) floats per canvas position, summed over the layers.
  int64_t kv_floats_per_position() const;
  // Weights one token's forward reads (embeddings and head excluded):
  // every layer's projections, and for MoE only the n_expert_used experts.
  int64_t active_layer_params() const;
  // Every layer weight (MoE: every expert).
  int64_t layer_params() const;
};

// The logits row that predicts canvas position `p`: p - 1 under
// shift_logits (ModelConfig::shift_logits), else p. Under the shift no row
// predicts position 0: this returns -1 there, and each caller says what it
// does instead (the samplers read row 0, as Dream's official code does by
// repeating the first row; the masked-token eval skips the position, as
// PyTorch's figures do). The one place the shift lives.
inline int32_t PredictingRow(bool shift_logits, int32_t p) { return shift_logits ? p - 1 : p; }

// Every layer as the model-wide keys of `config` and its architecture's
// traits describe it (`n_layer` copies of one LayerConfig, RoPE table 0):
// what a model of one layer kind is.
std::vector<LayerConfig> UniformLayers(const ModelConfig& config);

// Gemma 4's layers (traits().gemma) over the model-wide keys already in
// `config`: sliding layers take {arch}.attention.key_length_swa,
// head_count_kv[l], rope.dimension_count_swa and rope.freq_base_swa; global
// ones key_length, rope.dimension_count, rope.freq_base and rope_freqs.weight;
// attn_v's absence makes V the K projection. Also reads the model-wide
// Gemma keys (softcap, canvas length) and tensors (self-conditioning).
absl::Status ReadGemmaLayers(const GgufFile& file, std::vector<int64_t> head_count_kv,
                             ModelConfig* config);
// Its parts, for a writer of such files (dllm synth): a Gemma 4 layer
// before its kind is known, from the model-wide widths of `config`; and
// each layer of `config` (kinds marked) given its kind's shapes: sliding
// ones `swa_head_dim` and RoPE table 1, global ones config->head_dim and
// table 0, head_count_kv[l] KV heads, and V = K where value_is_key[l].
LayerConfig GemmaBaseLayer(const ModelConfig& config);
void ShapeGemmaLayers(int64_t swa_head_dim, std::span<const int64_t> head_count_kv,
                      const std::vector<bool>& value_is_key, ModelConfig* config);

// LLaDA2's layers (traits().ling_moe) over the model-wide keys already in
// `config`: the first {arch}.leading_dense_block_count are dense SwiGLU
// (feed_forward_length), the rest routed as expert_gating_func,
// expert_group_count / expert_group_used_count, expert_weights_norm and
// expert_weights_scale say, beside expert_shared_count shared experts of
// expert_shared_feed_forward_length. Also reads the block length. Errors
// name the key.
absl::Status ReadLingMoe(const GgufFile& file, ModelConfig* config);

// The routing of LLaDA2's MoE layers, as ReadLingMoe reads it (and a writer
// of such files, dllm synth, writes it).
struct LingMoe {
  int64_t dense_layers = 0;  // leading_dense_block_count
  RouterScore router_score = RouterScore::kSigmoid;
  int64_t groups = 1, groups_used = 1;
  bool norm_weights = true;
  float weights_scale = 1.0f;
  int64_t n_ff_shared = 0;
};
// Shapes the layers of `config` (built by UniformLayers): every layer's
// fused attn_qkv, the leading dense layers (feed_forward_length) and the
// routed ones.
void ShapeLingLayers(const LingMoe& moe, ModelConfig* config);

// Marks the sliding layers of `config` (its `layers` built) from
// {arch}.attention.sliding_window_pattern, as llama.cpp reads it: a
// per-layer array (true or nonzero: the layer slides; what DiffusionGemma's
// converter writes), or a period n (layer l slides unless l % n == n - 1;
// every layer when n is 0), each sliding layer keeping the keys within
// {arch}.attention.sliding_window. No pattern: every layer is global.
// ModelConfigFromGguf calls it for architectures whose traits say
// `sliding_window`. Errors name the key.
absl::Status ReadSlidingLayers(const GgufFile& file, ModelConfig* config);

// Reads and validates the hyperparameters. Errors name the key.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_MODEL_CONFIG_H_
