// What feeds a DenoiseSession its logits: the model's forward pass in
// production, or a function (the sampler tests and the official-run
// replays, which script or record the logits) through the same session code.
#ifndef DLLM_ENGINE_SESSION_LOGITS_SOURCE_H_
#define DLLM_ENGINE_SESSION_LOGITS_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "engine/model/forward.h"

namespace dllm {

class LogitsSource {
 public:
  virtual ~LogitsSource() = default;
  // Logits of `rows` (ascending canvas positions) of `canvas` into `out`
  // (rows.size() x n_vocab, row-major), unshifted: row i is the output at
  // position rows[i]. Called twice per step under CFG (conditional, then
  // the unconditional canvas). CANCELLED when `check` stops it.
  virtual absl::Status Run(std::span<const int32_t> canvas, std::span<const int32_t> rows,
                           float* out, const LayerCheck* check, ForwardStats* stats) = 0;
  // The longest canvas Run() takes.
  virtual int max_tokens() const = 0;
};

// The model's forward pass.
std::unique_ptr<LogitsSource> ForwardLogits(std::unique_ptr<ForwardPass> pass);

// A function with the contract of LogitsSource::Run, `out` sized to
// rows.size() x n_vocab. Takes any canvas length.
using LogitsFn = std::function<absl::Status(std::span<const int32_t> canvas,
                                            std::span<const int32_t> rows, std::span<float> out)>;
std::unique_ptr<LogitsSource> FunctionLogits(LogitsFn fn, int n_vocab);

}  // namespace dllm

#endif  // DLLM_ENGINE_SESSION_LOGITS_SOURCE_H_
