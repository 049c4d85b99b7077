#include "service/cli/cache_divergence.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/sampler/remasking.h"
#include "engine/session/denoise_session.h"

namespace dllm {
namespace {

// What one teacher-forced run found. The exact session in it runs on its
// own choices, so it is also the free-running exact run.
struct ForcedRun {
  int64_t rows = 0;
  double kl = 0;  // summed over rows
  int64_t agree = 0;
  int steps = 0;
  int first_divergence = -1;
  int exact_forward_steps = 0;
  std::vector<int32_t> exact_canvas;  // final
};

absl::StatusOr<ForcedRun> TeacherForced(const std::shared_ptr<const Model>& model,
                                        const SamplerConfig& config, const CachingOptions& caching,
                                        const std::vector<int32_t>& prompt) {
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<DenoiseSession> exact,
                        DenoiseSession::Create(model, config, prompt));
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<DenoiseSession> cached,
                        DenoiseSession::Create(model, config, prompt, caching));
  const size_t v = static_cast<size_t>(model->config().n_vocab);
  ForcedRun run;
  std::vector<double> kl;
  std::vector<char> agree;
  while (!exact->done()) {
    DLLM_ASSIGN_OR_RETURN(StepReport step, exact->Advance());
    DLLM_RETURN_IF_ERROR(cached->AdvanceWith(step.positions, step.tokens).status());
    const int index = run.steps++;
    if (step.forward_passes == 0) continue;
    ++run.exact_forward_steps;
    DLLM_ASSIGN_OR_RETURN(DenoiseSession::StepLogits e, exact->LastStepLogits());
    DLLM_ASSIGN_OR_RETURN(DenoiseSession::StepLogits c, cached->LastStepLogits());
    if (!std::equal(e.rows.begin(), e.rows.end(), c.rows.begin(), c.rows.end())) {
      return absl::InternalError(
          absl::StrCat("divergence: step ", index, " read different rows exact and cached"));
    }
    const size_t n = e.rows.size();
    kl.assign(n, 0.0);
    agree.assign(n, 0);
    tbb::parallel_for(size_t{0}, n, [&](size_t i) {
      const std::span<const float> p = e.logits.subspan(i * v, v), q = c.logits.subspan(i * v, v);
      kl[i] = KlDivergence(p, q);
      agree[i] = ArgmaxRow(p) == ArgmaxRow(q);
    });
    for (size_t i = 0; i < n; ++i) {
      run.kl += kl[i];
      run.agree += agree[i];
    }
    run.rows += static_cast<int64_t>(n);
    if (run.first_divergence < 0 && std::count(agree.begin(), agree.end(), 0) > 0) {
      run.first_divergence = index;
    }
  }
  run.exact_canvas.assign(exact->canvas().begin(), exact->canvas().end());
  return run;
}

// The cached session on its own, against the exact run's final canvas:
// identical generated tokens, forward steps.
absl::Status FreeRunning(const std::shared_ptr<const Model>& model, const SamplerConfig& config,
                         const CachingOptions& caching, const std::vector<int32_t>& prompt,
                         std::span<const int32_t> exact_canvas, int64_t* identical,
                         int64_t* generated, CacheDivergence* out) {
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<DenoiseSession> cached,
                        DenoiseSession::Create(model, config, prompt, caching));
  while (!cached->done()) {
    DLLM_ASSIGN_OR_RETURN(StepReport step, cached->Advance());
    out->cached_forward_steps += step.forward_passes > 0;
    out->cached_full_steps += step.cache_use == CacheUse::kRefill;
  }
  const std::span<const int32_t> b = cached->canvas();
  for (size_t p = prompt.size(); p < exact_canvas.size(); ++p)
    *identical += exact_canvas[p] == b[p];
  *generated += static_cast<int64_t>(exact_canvas.size() - prompt.size());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CacheDivergence> MeasureCacheDivergence(
    const std::shared_ptr<const Model>& model, const SamplerConfig& config,
    const CachingOptions& caching, const std::vector<std::vector<int32_t>>& prompts, int threads) {
  if (caching.cache == CacheMode::kNone) {
    return absl::InvalidArgumentError("divergence: needs a cache (--cache prefix or dual)");
  }
  CacheDivergence out;
  absl::Status status;
  double kl = 0, first_sum = 0;
  int64_t agree = 0, identical = 0, generated = 0;
  tbb::task_arena arena(threads);
  arena.execute([&] {
    for (const std::vector<int32_t>& prompt : prompts) {
      absl::StatusOr<ForcedRun> run = TeacherForced(model, config, caching, prompt);
      if (!run.ok()) {
        status = run.status();
        return;
      }
      ++out.runs;
      out.rows += run->rows;
      kl += run->kl;
      agree += run->agree;
      if (run->first_divergence < 0) {
        ++out.never_diverged;
        first_sum += run->steps;
      } else {
        first_sum += run->first_divergence;
        out.first_divergence_min = out.first_divergence_min < 0
                                       ? run->first_divergence
                                       : std::min(out.first_divergence_min, run->first_divergence);
      }
      out.exact_forward_steps += run->exact_forward_steps;
      status = FreeRunning(model, config, caching, prompt, run->exact_canvas, &identical,
                           &generated, &out);
      if (!status.ok()) return;
    }
  });
  if (!status.ok()) return status;
  if (out.rows > 0) {
    out.mean_kl = kl / static_cast<double>(out.rows);
    out.top1_agreement = static_cast<double>(agree) / static_cast<double>(out.rows);
  }
  if (out.runs > 0) out.first_divergence_mean = first_sum / out.runs;
  if (generated > 0) out.identical_tokens = static_cast<double>(identical) / generated;
  return out;
}

}  // namespace dllm
