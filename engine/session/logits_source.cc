#include "engine/session/logits_source.h"

#include <limits>
#include <utility>

namespace dllm {
namespace {

class ForwardPassLogits final : public LogitsSource {
 public:
  explicit ForwardPassLogits(std::unique_ptr<ForwardPass> pass) : pass_(std::move(pass)) {}
  absl::Status Run(const ForwardBatch& batch, float* out, const LayerCheck* check,
                   ForwardStats* stats) override {
    return pass_->Run(batch, out, check, stats);
  }
  ForwardLimits limits() const override { return pass_->limits(); }

 private:
  std::unique_ptr<ForwardPass> pass_;
};

class FunctionLogitsSource final : public LogitsSource {
 public:
  FunctionLogitsSource(LogitsFn fn, int n_vocab) : fn_(std::move(fn)), n_vocab_(n_vocab) {}
  absl::Status Run(const ForwardBatch& batch, float* out, const LayerCheck* check,
                   ForwardStats*) override {
    if (check != nullptr && check->cancel != nullptr && check->cancel->load()) {
      return absl::CancelledError("cancelled before the logits");
    }
    for (const SequenceInput& s : batch.sequences) {
      const size_t n = s.logit_rows.size() * static_cast<size_t>(n_vocab_);
      if (absl::Status status = fn_(s.tokens, s.logit_rows, std::span<float>(out, n)); !status.ok()) {
        return status;
      }
      out += n;
    }
    return absl::OkStatus();
  }
  ForwardLimits limits() const override {
    return {std::numeric_limits<int>::max(), std::numeric_limits<int>::max()};
  }

 private:
  LogitsFn fn_;
  int n_vocab_;
};

}  // namespace

std::unique_ptr<LogitsSource> ForwardLogits(std::unique_ptr<ForwardPass> pass) {
  return std::make_unique<ForwardPassLogits>(std::move(pass));
}

std::unique_ptr<LogitsSource> FunctionLogits(LogitsFn fn, int n_vocab) {
  return std::make_unique<FunctionLogitsSource>(std::move(fn), n_vocab);
}

}  // namespace dllm
