// Placeholder for the forward-pass hook (forward_logits_hook.h). TODO(#5):
// replace the body with the model's forward once engine/model/forward exists.
#include "tests/engine/sampler/forward_logits_hook.h"

namespace dllm::testing {

absl::StatusOr<ForwardLogits> MakeForwardLogits(const std::string& gguf_path) {
  return absl::UnimplementedError("no forward pass yet for " + gguf_path);
}

}  // namespace dllm::testing
