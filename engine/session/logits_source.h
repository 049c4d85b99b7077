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
  // Logits of every sequence's logit rows into its `logits` (ForwardPass::
  // Run's contract): under CFG the batch holds the conditional canvas, then
  // the unconditional one. CANCELLED when `check` stops it.
  virtual absl::Status Run(const ForwardBatch& batch, const LayerCheck* check,
                           ForwardStats* stats) = 0;
  // The longest canvas Run() takes, and how many rows one batch may compute.
  virtual ForwardLimits limits() const = 0;
};

// The model's forward pass, owned by the source.
std::unique_ptr<LogitsSource> ForwardLogits(std::unique_ptr<ForwardPass> pass);
// A pass that belongs to someone else (the server's engine, which runs
// every session's steps through its one pass) and outlives the source.
std::unique_ptr<LogitsSource> SharedForwardLogits(ForwardPass* pass);

// A function with the contract of one sequence's logits, `out` sized to
// rows.size() x n_vocab, called once per sequence of a batch. It sees the
// whole canvas and ignores the batch's caches and computed rows: scripted
// logits do not depend on them. Takes any canvas length.
using LogitsFn = std::function<absl::Status(std::span<const int32_t> canvas,
                                            std::span<const int32_t> rows, std::span<float> out)>;
std::unique_ptr<LogitsSource> FunctionLogits(LogitsFn fn, int n_vocab);

}  // namespace dllm

#endif  // DLLM_ENGINE_SESSION_LOGITS_SOURCE_H_
