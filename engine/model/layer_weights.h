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
  const float* norm = nullptr;       // (n_embd) RMSNorm of the layer input
  const float* post_norm = nullptr;  // (n_embd) RMSNorm of the output (LayerConfig::post_norms)
  const float* bq = nullptr;         // (q_dim), optional biases (LayerConfig::qkv_bias)
  const float* bk = nullptr;         // (kv_dim)
  const float* bv = nullptr;         // (kv_dim)
  const float* q_norm = nullptr;     // (head_dim), per-head RMSNorm of q (LayerConfig::qk_norm)
  const float* k_norm = nullptr;     // (head_dim)
  // (q_dim|kv_dim x n_embd), wo: (n_embd x q_dim); wv null where
  // LayerConfig::value_is_key.
  std::unique_ptr<Linear> wq, wk, wv, wo;
};

// A gated FFN: down(act(gate(x)) * up(x)), act SiLU (SwiGLU) or GELU
// (GeGLU) by the layer's FfnKind. The dense FFN, and each expert of a MoE
// layer (a slice of the 3-D ffn_{gate,up,down}_exps tensors, or of the
// fused ffn_gate_up_exps, repacked on its own).
struct GatedFfnWeights {
  std::unique_ptr<Linear> gate, up, down;  // (n_ff x n_embd), down: (n_embd x n_ff)
};

struct MoeWeights {
  std::unique_ptr<Linear> router;        // ffn_gate_inp: (n_expert x n_embd)
  std::vector<GatedFfnWeights> experts;  // n_expert
  // kGeGluMoe: the router's input scale (ffn_gate_inp.scale, n_embd) and
  // each expert's output scale (ffn_down_exps.scale, n_expert; optional).
  const float* router_input_scale = nullptr;
  const float* down_scale = nullptr;
  // LLaDA2: the bias added to the router's scores to choose experts
  // (exp_probs_b.bias, n_expert; optional), and the shared expert every row
  // runs (ffn_{gate,up,down}_shexp; LayerConfig::n_ff_shared wide).
  const float* expert_bias = nullptr;
  GatedFfnWeights shared;
};

struct LayerWeights {
  AttentionWeights attention;
  const float* ffn_norm = nullptr;  // (n_embd) the dense FFN's input norm
  GatedFfnWeights dense;            // FfnKind::kSwiGlu, kGeGluMoe
  MoeWeights moe;                   // FfnKind::kMoe, kGeGluMoe
  // kGeGluMoe's norms (n_embd each): the dense branch's output, the
  // experts' input and output, and their sum (post_ffw_norm).
  const float* dense_post_norm = nullptr;
  const float* experts_norm = nullptr;
  const float* experts_post_norm = nullptr;
  const float* ffn_post_norm = nullptr;
  // LayerConfig::output_scales: one float each.
  const float* output_scale = nullptr;          // layer_output_scale (canvas rows)
  const float* encoder_output_scale = nullptr;  // enc_layer_output_scale (prompt rows)
};

// DiffusionGemma's self-conditioning MLP (model-wide, self_cond_*): a GeGLU
// of the normed probability-weighted embedding of the previous step's
// logits, added to the canvas rows' inputs.
struct SelfConditioningWeights {
  const float* pre_norm = nullptr;  // (n_embd)
  GatedFfnWeights mlp;              // n_ff wide (feed_forward_length)
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_LAYER_WEIGHTS_H_
