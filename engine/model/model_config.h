// Hyperparameters and special tokens of a diffusion LM (LLaDA, Dream and the
// MoE models LLaDA-MoE and RND1), read from GGUF keys (`{arch}.*`,
// `tokenizer.ggml.*`). Plain structs; `ModelConfigFromGguf` is the only
// builder and validates what it reads. What differs between architectures
// lives in one table, `TraitsOf(Arch)`.
#ifndef DLLM_ENGINE_MODEL_MODEL_CONFIG_H_
#define DLLM_ENGINE_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/special_tokens.h"

namespace dllm {

enum class Arch { kLlada, kDream, kLladaMoe, kRnd1 };
absl::string_view ArchName(Arch arch);  // "llada", "dream", "llada-moe", "rnd1"
std::optional<Arch> ParseArch(absl::string_view name);
// "llada, dream, llada-moe, rnd1", for error messages.
const char* SupportedArchNames();

// How RoPE pairs dimensions: NORM rotates (x[2i], x[2i+1]) (LLaDA),
// NEOX rotates (x[i], x[i + head_dim/2]) (Dream and the MoE models).
enum class RopeType { kNorm, kNeox };
absl::string_view RopeTypeName(RopeType type);

// What an architecture's graph is made of, as the reference llama.cpp
// (src/models/{llada,dream,llada-moe,rnd1}.cpp) builds it.
struct ArchTraits {
  Arch arch;
  const char* name;      // general.architecture
  RopeType rope;         // llama_model_rope_type()
  bool qkv_bias;         // optional attn_{q,k,v}.bias are read and added
  bool qk_norm;          // per-head RMSNorm of q and k before RoPE (attn_{q,k}_norm)
  bool moe;              // the FFN is a routed mixture of experts (ffn_*_exps)
  bool moe_norm_weights; // top-k router weights renormalised to sum 1 (rnd1)
  bool output_required;  // output.weight must be present (no tied head)
  bool q_is_n_embd;      // attn_q is {n_embd, n_embd}: n_head * head_dim == n_embd
};
const ArchTraits& TraitsOf(Arch arch);

struct ModelConfig {
  Arch arch = Arch::kLlada;
  std::string name;       // general.name, e.g. "LLaDA-8B-Instruct"
  int64_t n_layer = 0;    // {arch}.block_count, e.g. 32
  int64_t n_embd = 0;     // {arch}.embedding_length, e.g. 4096
  int64_t n_head = 0;     // {arch}.attention.head_count, e.g. 32
  int64_t n_head_kv = 0;  // {arch}.attention.head_count_kv (default n_head)
  int64_t head_dim = 0;   // {arch}.attention.key_length (default n_embd / n_head)
  int64_t n_ff = 0;       // {arch}.feed_forward_length, e.g. 12288 (dense FFN width)
  int64_t n_vocab = 0;    // rows of token_embd.weight
  int64_t n_ctx_train = 0;  // {arch}.context_length, e.g. 4096
  RopeType rope_type = RopeType::kNorm;
  double rope_theta = 10000.0;  // {arch}.rope.freq_base (llama.cpp's default 10000)
  double rms_eps = 1e-5;        // {arch}.attention.layer_norm_rms_epsilon
  // diffusion.shift_logits: position p is predicted by the output row p - 1
  // (Dream, RND1). llama-diffusion-cli's default when absent: true.
  bool shift_logits = false;
  bool tied_output = false;     // no output.weight: the head reuses token_embd

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

  const ArchTraits& traits() const { return TraitsOf(arch); }
  bool moe() const { return n_expert > 0; }
  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  // The FFN width one token's activations need: n_ff, or n_ff_exp for MoE.
  int64_t ffn_width() const { return moe() ? n_ff_exp : n_ff; }
  // Weights one token's forward reads (embeddings and head excluded):
  // every layer's projections, and for MoE only the n_expert_used experts.
  int64_t active_layer_params() const;
  // Every layer weight (MoE: every expert).
  int64_t layer_params() const;
};


// Reads and validates the hyperparameters. Errors name the key.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_MODEL_CONFIG_H_
