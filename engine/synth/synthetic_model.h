// Random-weight GGUF files with the exact shapes and quantization layouts of
// real LLaDA / Dream / LLaDA-MoE / RND1 checkpoints, for benchmarks (a step
// costs the same whatever the weight values) and for tiny test models that
// llama.cpp loads, so its logits can be compared with ours. Tensors are quantized with the
// project's own quantizer and mixed per tensor the way llama.cpp's presets do, and written tensor
// by tensor (in row chunks), so an 8B file needs little memory. Large tensors repeat rows drawn
// from a pool of 256 quantized random rows per tensor (speed does not depend on the values;
// quantizing every row would take most of an hour for 8B).
#ifndef DLLM_ENGINE_SYNTH_SYNTHETIC_MODEL_H_
#define DLLM_ENGINE_SYNTH_SYNTHETIC_MODEL_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model_config.h"
#include "kernels/ggml_types.h"

namespace dllm {

struct SyntheticShape {
  std::string name;  // "8b", "7b", "1b", "7b-a1b", "30b-a3b", "tiny" or "custom"
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0;
  int64_t head_dim = 0;  // 0: n_embd / n_head; else written as attention.key_length
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // MoE arches only
  int64_t n_ctx = 4096;
  double rope_theta = 10000;
  double rms_eps = 1e-5;
  int32_t bos = -1, eos = -1, eot = -1, mask = -1;  // special token ids; bos/eot may be -1
  // diffusion-gemma only: the global layers' KV heads (head_dim is theirs),
  // the sliding layers' head dim, their window and RoPE base, the layer
  // pattern (layer l is global when l % global_every == global_every - 1)
  // and the canvas length.
  int64_t n_head_kv_global = 0, head_dim_swa = 0, window = 0, global_every = 0, canvas = 0;
  double rope_theta_swa = 10000;
  // llada2 only (Ling 2.0's MoE, as the fork's converter writes it): the
  // leading dense layers (n_ff wide), expert groups, the shared expert's
  // width and the routed scale; half of each head turns.
  int64_t n_dense_lead = 0, n_expert_groups = 1, n_expert_groups_used = 1, n_ff_shared = 0;
  double expert_weights_scale = 1.0;

  int64_t HeadDim() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

// The real models' hyperparameters: llada 8b = LLaDA-8B (4096 x 32 layers,
// ffn 12288, vocab 126464), dream 7b = Dream-v0-7B (3584 x 28, GQA 28/4, ffn
// 18944, vocab 152064), llada-moe 7b-a1b = LLaDA-MoE-7B-A1B (2048 x 16,
// 64 experts of 1024, 8 active, vocab 157184), rnd1 30b-a3b = RND1-30B-A3B
// (2048 x 48, 32/4 heads of 128, 128 experts of 768, 8 active, vocab
// 151936); diffusion-gemma 26b-a4b = DiffusionGemma on Gemma 4 26B-A4B (2816
// x 30, 16 heads; 25 sliding layers of 8 KV heads of 256 over a window of
// 1024, 5 global of 2 KV heads of 512; a dense GeGLU of 2112 beside 128
// experts of 704, 8 active; vocab 262144, canvas 256), llada2 mini =
// LLaDA2.0-mini / 2.1-mini (2048 x 20, 16/4 heads of 128, the first layer
// dense of 5120, then 256 experts of 512 in 8 groups (4 kept), 8 active,
// one shared expert of 512, routed scale 2.5, vocab 157184); 1b = d 2048 x 16
// layers, ffn 5632 with the family's vocabulary;
// tiny = d 256 x 2 layers, vocab 8256 (MoE: 8 experts of 256, 2 active for
// llada-moe and 3 for rnd1, whose heads are 128 wide so q is 512 != d;
// llada2: 1 dense layer of 512, 16 experts of 256 in 4 groups (2 kept),
// 4 active, a shared expert of 256).
// "custom:d=..,l=..,h=..,kv=..,ff=..,v=..,e=..,eu=..,fe=..,hd=.." sets each
// field.
absl::StatusOr<SyntheticShape> SyntheticShapeFor(Arch arch, absl::string_view shape);

// llama.cpp's file-type presets.
enum class QuantPreset { kQ4_K_M, kQ5_K_M, kQ6_K, kQ8_0, kQ4_0, kF16, kF32 };
absl::StatusOr<QuantPreset> ParseQuantPreset(absl::string_view name);  // "q4_k_m", ...
const char* QuantPresetName(QuantPreset preset);

// The type llama.cpp's preset gives a 2-D tensor: e.g. Q4_K_M keeps Q6_K for
// `output` and for attn_v / ffn_down in the layers llama.cpp's
// use_more_bits() picks (the first and last eighth, and every third between).
GgmlType PresetTensorType(QuantPreset preset, absl::string_view tensor, int64_t layer,
                          int64_t n_layer);

// `type`, or llama-quantize's fallback when its blocks do not divide a row
// of `cols` (llama-quant.cpp's tensor_type_fallback: Q4_K -> Q5_0, Q5_K ->
// Q5_1, Q6_K -> Q8_0), or F16 when the fallback's do not either.
GgmlType FallbackType(GgmlType type, int64_t cols);

// Writes the model; `progress(done_bytes, total_bytes)` is called per chunk.
absl::Status WriteSyntheticModel(Arch arch, const SyntheticShape& shape, QuantPreset preset,
                                 uint64_t seed, const std::string& path,
                                 const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace dllm

#endif  // DLLM_ENGINE_SYNTH_SYNTHETIC_MODEL_H_
