// How many masked positions each step commits, exactly as the official code
// computes it: LLaDA's per-block integer split and Dream's float32 timestep
// schedule (samplers.md 3.2 and 4.4). A "nice" integer schedule for Dream
// diverges at the first and the last step.
#ifndef DLLM_ENGINE_SAMPLER_SCHEDULE_H_
#define DLLM_ENGINE_SAMPLER_SCHEDULE_H_

#include <span>
#include <vector>

namespace dllm {

// LLaDA: tokens committed in step i of a block that holds `masked` masks at
// its start, over `steps_per_block` steps: masked div S, plus one for the
// first masked mod S steps. Writes `steps_per_block` counts into `out`.
void LladaBlockSchedule(int masked, int steps_per_block, std::span<int> out);
std::vector<int> LladaBlockSchedule(int masked, int steps_per_block);

// Dream: torch.linspace(1, eps, steps + 1) in float32, element for element
// as PyTorch's CPU kernel computes it (two-sided: from the start for the
// first half, from the end for the rest). Writes steps + 1 values.
void DreamTimesteps(int steps, float eps, std::span<float> out);
std::vector<float> DreamTimesteps(int steps, float eps);

// 1 - t[i+1] / t[i] in float32: the fraction of the current masks step i
// commits (Dream 'origin' uses it as a per-position probability); 1 at the
// last step.
float DreamTransferFraction(std::span<const float> timesteps, int step);

// Dream: tokens committed at `step` when `masked` masks remain:
// trunc(float32(masked) * (1 - t[i+1]/t[i])), all of them at the last step.
int DreamTransferCount(std::span<const float> timesteps, int step, int masked);

// The whole Dream schedule for a canvas that starts with `masked` masks and
// commits exactly the counts above (every deterministic algorithm does).
std::vector<int> DreamSchedule(int masked, int steps, float eps);

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_SCHEDULE_H_
