// Hook for the official-run replay test: a LogitsFn backed by the real
// forward pass of a GGUF model.
#ifndef DLLM_TESTS_ENGINE_SAMPLER_FORWARD_LOGITS_HOOK_H_
#define DLLM_TESTS_ENGINE_SAMPLER_FORWARD_LOGITS_HOOK_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/sampler/generate_loop.h"

namespace dllm::testing {

// A LogitsFn computing float32 logits (raw, unshifted; n_vocab from the
// model) of the model at `gguf_path`, plus the model's n_vocab.
struct ForwardLogits {
  LogitsFn fn;
  int n_vocab = 0;
};
absl::StatusOr<ForwardLogits> MakeForwardLogits(const std::string& gguf_path);

}  // namespace dllm::testing

#endif  // DLLM_TESTS_ENGINE_SAMPLER_FORWARD_LOGITS_HOOK_H_
