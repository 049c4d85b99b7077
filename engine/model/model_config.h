// Hyperparameters and special tokens of a LLaDA or Dream model, read from
// GGUF keys (`{arch}.*`, `tokenizer.ggml.*`). Plain structs; `ModelConfigFromGguf`
// is the only builder and validates what it reads.
#ifndef DLLM_ENGINE_MODEL_MODEL_CONFIG_H_
#define DLLM_ENGINE_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "engine/gguf/gguf_reader.h"

namespace dllm {

enum class Arch { kLlada, kDream };
absl::string_view ArchName(Arch arch);  // "llada" / "dream"
std::optional<Arch> ParseArch(absl::string_view name);

// How RoPE pairs dimensions: NORM rotates (x[2i], x[2i+1]) (LLaDA),
// NEOX rotates (x[i], x[i + head_dim/2]) (Dream).
enum class RopeType { kNorm, kNeox };
absl::string_view RopeTypeName(RopeType type);

struct SpecialTokens {
  int32_t bos = -1;   // tokenizer.ggml.bos_token_id
  int32_t eos = -1;   // tokenizer.ggml.eos_token_id
  int32_t eot = -1;   // tokenizer.ggml.eot_token_id
  int32_t pad = -1;   // tokenizer.ggml.padding_token_id
  int32_t mask = -1;  // tokenizer.ggml.mask_token_id; required for diffusion
  bool add_bos = false;  // tokenizer.ggml.add_bos_token
};

struct ModelConfig {
  Arch arch = Arch::kLlada;
  std::string name;       // general.name, e.g. "LLaDA-8B-Instruct"
  int64_t n_layer = 0;    // {arch}.block_count, e.g. 32
  int64_t n_embd = 0;     // {arch}.embedding_length, e.g. 4096
  int64_t n_head = 0;     // {arch}.attention.head_count, e.g. 32
  int64_t n_head_kv = 0;  // {arch}.attention.head_count_kv (default n_head)
  int64_t head_dim = 0;   // {arch}.attention.key_length (default n_embd / n_head)
  int64_t n_ff = 0;       // {arch}.feed_forward_length, e.g. 12288
  int64_t n_vocab = 0;    // rows of token_embd.weight
  int64_t n_ctx_train = 0;  // {arch}.context_length, e.g. 4096
  RopeType rope_type = RopeType::kNorm;
  double rope_theta = 10000.0;  // {arch}.rope.freq_base (llama.cpp's default 10000)
  double rms_eps = 1e-5;        // {arch}.attention.layer_norm_rms_epsilon
  bool shift_logits = false;    // diffusion.shift_logits (Dream default true)
  bool tied_output = false;     // no output.weight: the head reuses token_embd

  // Tokenizer facts.
  std::string tokenizer_model;  // tokenizer.ggml.model, e.g. "gpt2"
  std::string tokenizer_pre;    // tokenizer.ggml.pre, e.g. "qwen2"
  bool has_chat_template = false;
  SpecialTokens tokens;

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and validates the hyperparameters. Errors name the key.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_MODEL_CONFIG_H_
