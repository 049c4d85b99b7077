// LLaDA and Dream step schedules. The Dream arithmetic is float32 on purpose
// and must stay so: the official code truncates float32 products that fall
// just below an integer (samplers.md 4.4). Nothing here may be compiled with
// FMA contraction changing a rounding; the x86-64 baseline has no FMA, and
// samplers.md found the schedules identical with and without it.
#include "engine/sampler/schedule.h"

#include <cstdint>

#include "engine/base/status_macros.h"

namespace dllm {

void LladaBlockSchedule(int masked, int steps_per_block, std::span<int> out) {
  DLLM_CHECK(steps_per_block > 0 && out.size() == static_cast<size_t>(steps_per_block));
  const int base = masked / steps_per_block;
  const int extra = masked % steps_per_block;
  for (int i = 0; i < steps_per_block; ++i) out[i] = base + (i < extra ? 1 : 0);
}

std::vector<int> LladaBlockSchedule(int masked, int steps_per_block) {
  std::vector<int> out(steps_per_block);
  LladaBlockSchedule(masked, steps_per_block, out);
  return out;
}

void DreamTimesteps(int steps, float eps, std::span<float> out) {
  DLLM_CHECK(steps > 0 && out.size() == static_cast<size_t>(steps) + 1);
  // aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp, linspace with
  // n = steps + 1 points: step = (end - start) / (n - 1) in the output
  // dtype; index i < n / 2 is start + step * i, the rest end - step * (n - 1 - i).
  const int64_t n = static_cast<int64_t>(steps) + 1;
  const float start = 1.0f;
  const float end = eps;
  const float step = (end - start) / static_cast<float>(n - 1);
  const int64_t halfway = n / 2;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = i < halfway ? start + step * static_cast<float>(i)
                         : end - step * static_cast<float>(n - 1 - i);
  }
}

std::vector<float> DreamTimesteps(int steps, float eps) {
  std::vector<float> out(static_cast<size_t>(steps) + 1);
  DreamTimesteps(steps, eps, out);
  return out;
}

float DreamTransferFraction(std::span<const float> timesteps, int step) {
  DLLM_CHECK(step >= 0 && static_cast<size_t>(step) + 1 < timesteps.size());
  if (static_cast<size_t>(step) + 2 == timesteps.size()) return 1.0f;
  const float t = timesteps[step];
  const float s = timesteps[step + 1];
  const float ratio = s / t;
  return 1.0f - ratio;
}

int DreamTransferCount(std::span<const float> timesteps, int step, int masked) {
  if (static_cast<size_t>(step) + 2 == timesteps.size()) return masked;
  // Python: int(num_mask_token * (1 - s / t)) on float32 0-d tensors.
  const float product = static_cast<float>(masked) * DreamTransferFraction(timesteps, step);
  return static_cast<int>(product);
}

std::vector<int> DreamSchedule(int masked, int steps, float eps) {
  const std::vector<float> t = DreamTimesteps(steps, eps);
  std::vector<int> counts(steps);
  for (int i = 0; i < steps; ++i) {
    counts[i] = DreamTransferCount(t, i, masked);
    masked -= counts[i];
  }
  return counts;
}

}  // namespace dllm
