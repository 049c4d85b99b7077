// The weights of one transformer layer, as parts: attention, and the FFN of
// the layer's kind (LayerConfig::ffn). A part the layer's kinds do not use
// stays empty. tensor_layout.h lists the tensor behind each member; the
// loader fills them from that list.
#ifndef DLLM_ENGINE_MODEL_LAYER_WEIGHTS_H_
#define DLLM_ENGINE_MODEL_LAYER_WEIGHTS_H_

#include <memory>
#include <vector>

#include "engine/model/linear.h"

namespace dllm {

struct AttentionWeights {
  const float* norm = nullptr;    // (n_embd) RMSNorm of the layer input
  const float* bq = nullptr;      // (q_dim), optional biases (LayerConfig::qkv_bias)
  const float* bk = nullptr;      // (kv_dim)
  const float* bv = nullptr;      // (kv_dim)
  const float* q_norm = nullptr;  // (head_dim), per-head RMSNorm of q (LayerConfig::qk_norm)
  const float* k_norm = nullptr;  // (head_dim)
  std::unique_ptr<Linear> wq, wk, wv, wo;  // (q_dim|kv_dim x n_embd), wo: (n_embd x q_dim)
};

// A SwiGLU FFN: down(silu(gate(x)) * up(x)). The dense FFN, and each expert
// of a MoE layer (a slice of the 3-D ffn_{gate,up,down}_exps tensors,
// repacked on its own).
struct SwiGluWeights {
  std::unique_ptr<Linear> gate, up, down;  // (n_ff x n_embd), down: (n_embd x n_ff)
};

struct MoeWeights {
  std::unique_ptr<Linear> router;      // ffn_gate_inp: (n_expert x n_embd)
  std::vector<SwiGluWeights> experts;  // n_expert
};

struct LayerWeights {
  AttentionWeights attention;
  const float* ffn_norm = nullptr;  // (n_embd)
  SwiGluWeights dense;              // FfnKind::kSwiGlu
  MoeWeights moe;                   // FfnKind::kMoe
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_LAYER_WEIGHTS_H_
