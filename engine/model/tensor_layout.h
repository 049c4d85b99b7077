// The tensors a model GGUF must (or may) hold, with their shapes,
// and the compatibility check that the loader, `dllm inspect` and
// `dllm doctor` share.
#ifndef DLLM_ENGINE_MODEL_TENSOR_LAYOUT_H_
#define DLLM_ENGINE_MODEL_TENSOR_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"

namespace dllm {

struct ExpectedTensor {
  std::string name;         // e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> ne;  // GGUF order: ne[0] = row length
  bool required = true;
};

// The smallest canvas a model must hold: one prompt token and one position.
inline constexpr int64_t kMinContextLength = 2;

// Every tensor the forward pass reads for `config`'s architecture.
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config);

// Everything that stops this build from running `file`, one sentence each
// (empty when it can run). Types the kernels lack are reported as
// "unsupported tensor type T for tensor NAME".
std::vector<std::string> CompatibilityProblems(const GgufFile& file, const ModelConfig& config);

// The first problem as a status (UNIMPLEMENTED for unsupported types or
// architectures, INVALID_ARGUMENT otherwise), or OK.
absl::Status CheckCompatible(const GgufFile& file, const ModelConfig& config);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_TENSOR_LAYOUT_H_
