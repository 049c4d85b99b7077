#include "service/cli/sampler_divergence.h"

#include <tbb/task_arena.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/session/denoise_session.h"

namespace dllm {
namespace {

struct Answer {
  std::vector<int32_t> tokens;
  int steps = 0;
};

absl::StatusOr<Answer> RunToEnd(absl::StatusOr<std::unique_ptr<DenoiseSession>> created) {
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<DenoiseSession> session, std::move(created));
  while (!session->done()) DLLM_RETURN_IF_ERROR(session->Advance().status());
  const std::span<const int32_t> out = session->OutputTokens();
  return Answer{std::vector<int32_t>(out.begin(), out.end()), session->steps()};
}

}  // namespace

absl::StatusOr<SamplerDivergence> MeasureSamplerDivergence(
    const std::shared_ptr<const Model>& model, const EntropyBoundConfig& real,
    const SamplerConfig& stand_in, const std::vector<std::vector<int32_t>>& prompts, int threads) {
  if (model->config().canvas_length == 0) {
    return absl::InvalidArgumentError(
        "--sampler masked: the stand-in's divergence is measured on a canvas model "
        "(diffusion.canvas_length)");
  }
  if (stand_in.gen_length != real.canvas_length) {
    return absl::InvalidArgumentError(absl::StrCat("--gen-length ", stand_in.gen_length,
                                                   ": the stand-in writes one canvas of ",
                                                   real.canvas_length, " positions"));
  }
  SamplerDivergence d;
  d.canvas_length = real.canvas_length;
  const size_t c = static_cast<size_t>(real.canvas_length);
  int64_t agree = 0;
  double first_sum = 0, real_len = 0, stand_in_len = 0;
  absl::Status status;
  tbb::task_arena arena(threads);
  arena.execute([&] {
    for (const std::vector<int32_t>& prompt : prompts) {
      CachingOptions exact;
      exact.cache = CacheMode::kExact;
      absl::StatusOr<Answer> a =
          RunToEnd(DenoiseSession::Create(model, real, prompt, CanvasRun{}, exact));
      if (!a.ok()) {
        status = a.status();
        return;
      }
      absl::StatusOr<Answer> b = RunToEnd(DenoiseSession::Create(model, stand_in, prompt));
      if (!b.ok()) {
        status = b.status();
        return;
      }
      const auto at = [](const std::vector<int32_t>& t, size_t i) {
        return i < t.size() ? t[i] : -1;
      };
      size_t first = c;
      for (size_t i = 0; i < c; ++i) {
        const bool same = at(a->tokens, i) == at(b->tokens, i);
        agree += same;
        if (!same && first == c) first = i;
      }
      ++d.runs;
      d.identical_answers += a->tokens == b->tokens;
      first_sum += static_cast<double>(first);
      real_len += static_cast<double>(a->tokens.size());
      stand_in_len += static_cast<double>(b->tokens.size());
      d.real_steps += a->steps;
      d.stand_in_steps += b->steps;
    }
  });
  DLLM_RETURN_IF_ERROR(status);
  if (d.runs == 0) return absl::InvalidArgumentError("divergence: no prompts");
  d.identical_tokens = static_cast<double>(agree) / static_cast<double>(c * d.runs);
  d.first_difference_mean = first_sum / d.runs;
  d.real_length_mean = real_len / d.runs;
  d.stand_in_length_mean = stand_in_len / d.runs;
  return d;
}

}  // namespace dllm
