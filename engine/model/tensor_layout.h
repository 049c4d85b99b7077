// The tensors a model GGUF must (or may) hold, with their shapes and where
// the loader puts each (the one list of tensor names: the compatibility
// check and Model::Load both read it), and the compatibility check that the
// loader, `dllm inspect` and `dllm doctor` share.
#ifndef DLLM_ENGINE_MODEL_TENSOR_LAYOUT_H_
#define DLLM_ENGINE_MODEL_TENSOR_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_config.h"

namespace dllm {

// The tensors outside the layers.
inline constexpr char kTokenEmbdTensor[] = "token_embd.weight";
inline constexpr char kOutputNormTensor[] = "output_norm.weight";
inline constexpr char kOutputTensor[] = "output.weight";  // absent: the head reuses token_embd
// DiffusionGemma's: the global layers' RoPE factors (RopeSpec::freq_factors)
// and the self-conditioning MLP (ModelConfig::self_conditioning).
inline constexpr char kRopeFreqsTensor[] = "rope_freqs.weight";
inline constexpr char kSelfCondPreNormTensor[] = "self_cond_pre_norm.weight";
inline constexpr char kSelfCondGateTensor[] = "self_cond_gate.weight";
inline constexpr char kSelfCondUpTensor[] = "self_cond_up.weight";
inline constexpr char kSelfCondDownTensor[] = "self_cond_down.weight";

// "blk.7.", the prefix of layer 7's tensor names.
std::string LayerPrefix(int64_t layer);

// One tensor of a layer and the member of LayerWeights it fills: a 1-D
// float vector read in place (`vector`), a matrix repacked as a Linear
// (`matrix`) or cut into several (`cuts`), or a 3-D expert tensor cut into one Linear per expert,
// each going to `expert` of MoeWeights::experts[e] (with `expert_second` set, each expert's rows
// are cut in two halves: the first to `expert`, the second to `expert_second`; the fused
// ffn_gate_up_exps). A run of a fused matrix's rows that becomes a Linear of its own: LLaDA2's
// attn_qkv is cut into q, k and v, so the forward pass sees the three
// projections every other model has.
struct RowCut {
  std::unique_ptr<Linear>* (*matrix)(LayerWeights&) = nullptr;
  int64_t rows = 0;
};

struct LayerTensor {
  std::string suffix;       // after LayerPrefix(l), e.g. "attn_q.weight"
  std::vector<int64_t> ne;  // GGUF order: ne[0] = row length
  bool required = true;
  const float** (*vector)(LayerWeights&) = nullptr;
  std::unique_ptr<Linear>* (*matrix)(LayerWeights&) = nullptr;
  std::unique_ptr<Linear> GatedFfnWeights::*expert = nullptr;
  std::unique_ptr<Linear> GatedFfnWeights::*expert_second = nullptr;
  // Set instead of `matrix`: the matrix's rows, cut in order (their rows add
  // up to ne[1]).
  std::vector<RowCut> cuts;
};

// The tensors of a layer of kind `layer` in a model of `config`: its
// attention's, then its FFN's.
std::vector<LayerTensor> LayerTensors(const ModelConfig& config, const LayerConfig& layer);

struct ExpectedTensor {
  std::string name;         // e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> ne;  // GGUF order: ne[0] = row length
  bool required = true;
};

// The smallest canvas a model must hold: one prompt token and one position.
inline constexpr int64_t kMinContextLength = 2;

// Every tensor the forward pass reads for `config`'s architecture.
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config);

// One thing that stops this build from running a file: UNIMPLEMENTED for
// what dllm does not support (a type, a layout, a tensor, a tokenizer),
// INVALID_ARGUMENT for a file that contradicts itself or lacks a part.
struct CompatibilityProblem {
  absl::StatusCode code;
  std::string message;  // one sentence, e.g. "unsupported tensor type T for tensor NAME"
};

// Everything that stops this build from running `file` (empty when it can run).
std::vector<CompatibilityProblem> CompatibilityProblems(const GgufFile& file,
                                                        const ModelConfig& config);

// The first problem as a status with its code, or OK.
absl::Status CheckCompatible(const GgufFile& file, const ModelConfig& config);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_TENSOR_LAYOUT_H_
