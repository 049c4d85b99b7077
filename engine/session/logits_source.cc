#include "engine/session/logits_source.h"

#include <limits>
#include <utility>

namespace dllm {
namespace {

class ForwardPassLogits final : public LogitsSource {
 public:
  // `owned` may be null: then `pass` belongs to someone else.
  ForwardPassLogits(ForwardPass* pass, std::unique_ptr<ForwardPass> owned)
      : pass_(pass), owned_(std::move(owned)) {}
  absl::Status Run(const ForwardBatch& batch, const LayerCheck* check,
                   ForwardStats* stats) override {
    return pass_->Run(batch, check, stats);
  }
  ForwardLimits limits() const override { return pass_->limits(); }

 private:
  ForwardPass* pass_;
  std::unique_ptr<ForwardPass> owned_;
};

class FunctionLogitsSource final : public LogitsSource {
 public:
  FunctionLogitsSource(LogitsFn fn, int n_vocab) : fn_(std::move(fn)), n_vocab_(n_vocab) {}
  absl::Status Run(const ForwardBatch& batch, const LayerCheck* check, ForwardStats*) override {
    if (check != nullptr && check->cancel != nullptr && check->cancel->load()) {
      return absl::CancelledError("cancelled before the logits");
    }
    for (const SequenceInput& s : batch.sequences) {
      const size_t n = s.logit_rows.size() * static_cast<size_t>(n_vocab_);
      if (absl::Status status = fn_(s.tokens, s.logit_rows, std::span<float>(s.logits, n));
          !status.ok()) {
        return status;
      }
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
  ForwardPass* raw = pass.get();
  return std::make_unique<ForwardPassLogits>(raw, std::move(pass));
}

std::unique_ptr<LogitsSource> SharedForwardLogits(ForwardPass* pass) {
  return std::make_unique<ForwardPassLogits>(pass, nullptr);
}

std::unique_ptr<LogitsSource> FunctionLogits(LogitsFn fn, int n_vocab) {
  return std::make_unique<FunctionLogitsSource>(std::move(fn), n_vocab);
}

}  // namespace dllm
