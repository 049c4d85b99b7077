// The official-run replay's logits come from the real forward pass
// (ForwardPass at the best ISA level), sized to each canvas on first use.
#include "tests/engine/sampler/forward_logits_hook.h"

#include <memory>

#include "engine/model/forward.h"

namespace dllm::testing {

absl::StatusOr<ForwardLogits> MakeForwardLogits(const std::string& gguf_path) {
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(gguf_path, {BestIsaLevel()});
  if (!model.ok()) return model.status();
  auto pass = std::make_shared<std::unique_ptr<ForwardPass>>();
  ForwardLogits out;
  out.n_vocab = static_cast<int>((*model)->config().n_vocab);
  out.fn = [model = *model, pass](std::span<const int32_t> canvas, std::span<const int32_t> rows,
                                   std::span<float> logits) -> absl::Status {
    const int n = static_cast<int>(canvas.size());
    if (*pass == nullptr || (*pass)->max_tokens() != n) {
      absl::StatusOr<std::unique_ptr<ForwardPass>> created = ForwardPass::Create(model, n);
      if (!created.ok()) return created.status();
      *pass = std::move(*created);
    }
    return (*pass)->Run(canvas, rows, logits.data());
  };
  return out;
}

}  // namespace dllm::testing
