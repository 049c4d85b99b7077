// Denoiser: a diffusion sampler as a step-by-step state machine, whatever
// its rule: the masked samplers of LLaDA and Dream (DenoiseSampler) or
// DiffusionGemma's entropy-bound renoising (EntropyBoundDenoiser). Each
// step it plans the forward it needs, takes that forward's logits and
// moves the canvas on. DenoiseSession drives any of them:
//
//   while (!d.done()) {
//     plan = d.Plan();
//     logits = plan.logit_rows.empty() ? none : forward(plan);
//     d.Step(logits, uncond_logits);
//   }
//   output = d.Output();
#ifndef DLLM_ENGINE_SAMPLER_DENOISER_H_
#define DLLM_ENGINE_SAMPLER_DENOISER_H_

#include <cstdint>
#include <span>

namespace dllm {

// The forward one step needs. Views into the denoiser, valid until its next
// Step().
struct DenoiserPlan {
  // The canvas the forward reads, prompt included.
  std::span<const int32_t> canvas;
  // Canvas rows (ascending, unique) whose logits Step() takes; empty: the
  // step needs no forward.
  std::span<const int32_t> logit_rows;
  // Classifier-free guidance: the same rows of this canvas too (empty: none).
  std::span<const int32_t> uncond_canvas;
  // Self-conditioning: the previous step's logits of `logit_rows`
  // (rows x n_vocab), for the model to read at `self_conditioning_temp_inv`;
  // empty: none (the first step, or a sampler without it).
  std::span<const float> self_conditioning;
  float self_conditioning_temp_inv = 1.0f;
};

// The tokens one Step() wrote, positions ascending. Views into the
// denoiser, valid until its next Step().
struct StepCommits {
  std::span<const int32_t> positions;
  std::span<const int32_t> tokens;
};

class Denoiser {
 public:
  virtual ~Denoiser() = default;

  virtual bool done() const = 0;
  virtual int step() const = 0;  // Step() calls so far
  virtual int prompt_len() const = 0;
  // The generated region is [prompt_len(), gen_end()) of canvas().
  virtual int gen_end() const = 0;
  virtual std::span<const int32_t> canvas() const = 0;
  // The next step's forward. Must not be called when done().
  virtual DenoiserPlan Plan() const = 0;
  // Takes the planned rows' logits (rows x n_vocab; under CFG the
  // unconditional canvas's in `uncond`; both empty when the plan had no
  // rows) and moves the canvas on. Must not be called when done().
  virtual StepCommits Step(std::span<const float> logits, std::span<const float> uncond) = 0;
  // The generated tokens to show the user as they stand (the result once
  // done()).
  virtual std::span<const int32_t> Output() const = 0;
  // The block a blockwise sampler is in, and its length, for the cache
  // policies; a sampler without blocks has one, the generated region.
  virtual int block() const { return 0; }
  virtual int block_length() const { return gen_end() - prompt_len(); }
  // The canvas positions the next forward reads, [0, window_end()): all of
  // it, except for a block-causal sampler (LLaDA2), whose blocks after the
  // current one are invisible to it and are not computed.
  virtual int window_end() const { return static_cast<int>(canvas().size()); }
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_DENOISER_H_
