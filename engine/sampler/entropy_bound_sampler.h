// EntropyBoundSampler: DiffusionGemma's denoiser (the `diffusion.eb_*` GGUF
// keys; docs/diffusion-gemma.md section 4 has the reference's algorithm),
// as a step-by-step state machine independent of the model. Unlike the
// masked samplers (DenoiseSampler), the canvas starts as uniform random
// tokens and every position is rewritten at every step:
//
//   - the temperature falls linearly from t_max towards t_min over at most
//     max_steps steps (t = t_min + (t_max - t_min) * k / S, k = S .. 1);
//   - per position, from the step's logits divided by t: the argmax, the
//     entropy (natural log), and a sample drawn by inverse CDF with a
//     pre-drawn uniform;
//   - positions sorted by entropy are accepted while the entropies before
//     them sum to at most entropy_bound (so at least one is); accepted
//     positions take their sample, every other one a fresh random token;
//   - it stops when the argmax canvas has held for stability_threshold steps
//     and the mean entropy is below confidence_threshold. The output is the
//     argmax canvas.
//
// Random draws: std::mt19937(seed); the initial canvas takes canvas_length
// uniform tokens, then each step, after its forward, one uniform float and
// one renoise token per position, interleaved. With libstdc++'s
// distributions (the build's standard library) the draws, and so every
// step, are bit-identical to the reference's (tests/data/sampler-eb).
//
// Driver loop (the forward needs the canvas, and from the second step on
// the previous step's logits at prev_temp_inv() for self-conditioning):
//
//   while (!s.done()) {
//     logits = forward(prompt, s.canvas(), s.step() > 0 ? previous_logits : none,
//                      s.prev_temp_inv());          // canvas_length x n_vocab
//     s.Step(logits);
//   }
//   output = s.output();
//
// Thread-safety: one thread at a time, inside the task arena it was created
// in (per-thread scratch); Step() scores positions in parallel (each
// independently, so the result does not depend on the thread count).
#ifndef DLLM_ENGINE_SAMPLER_ENTROPY_BOUND_SAMPLER_H_
#define DLLM_ENGINE_SAMPLER_ENTROPY_BOUND_SAMPLER_H_

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/parallel/per_thread.h"

namespace dllm {

// The sampler's settings; the defaults are the reference's (and the real
// model's generation config).
struct EntropyBoundConfig {
  int canvas_length = 256;      // diffusion.canvas_length
  int max_steps = 48;           // diffusion.eb_max_steps
  float t_min = 0.4f;           // diffusion.eb_t_min (never reached: the last step is above it)
  float t_max = 0.8f;           // diffusion.eb_t_max (the first step's)
  float entropy_bound = 0.1f;   // diffusion.eb_entropy_bound (nats)
  int stability_threshold = 1;  // diffusion.eb_stability_threshold (steps)
  float confidence_threshold = 0.005f;  // diffusion.eb_confidence_threshold (mean nats)
  uint32_t seed = 0xFFFFFFFFu;          // the reference CLI's default seed

  // INVALID_ARGUMENT naming the field: canvas_length and max_steps >= 1,
  // 0 < t_min <= t_max, finite non-negative bounds, stability >= 0.
  absl::Status Validate() const;
};

// The settings a canvas model's file gives (diffusion.canvas_length and
// the diffusion.eb_* keys, each a number of any type, as the reference CLI
// reads them); a key absent keeps the default above. The result is
// validated; errors name the key.
absl::StatusOr<EntropyBoundConfig> EntropyBoundConfigFromGguf(const GgufFile& file);

// What one Step() decided. Views into the sampler, valid until the next Step().
struct EntropyBoundStep {
  int step = 0;  // 0-based
  float temperature = 0;
  std::span<const float> uniform;    // the pre-drawn uniform per position
  std::span<const int32_t> renoise;  // the pre-drawn random token per position
  std::span<const int32_t> argmax;
  std::span<const float> entropy;
  std::span<const int32_t> sampled;
  std::span<const uint8_t> accepted;  // 1: the position took its sample
  int held = 0;                       // steps the argmax canvas has held
  bool confident = false;             // mean entropy < confidence_threshold
  bool finished = false;
};

class EntropyBoundSampler {
 public:
  static absl::StatusOr<EntropyBoundSampler> Create(const EntropyBoundConfig& config, int n_vocab);

  bool done() const { return done_; }
  int step() const { return step_; }  // Step() calls so far
  const EntropyBoundConfig& config() const { return config_; }
  int n_vocab() const { return n_vocab_; }
  // The temperature the next step uses.
  float temperature() const;
  // 1 / the previous step's temperature: self-conditioning reads the
  // previous logits at it (1 before the first step, whose gate is off).
  float prev_temp_inv() const { return prev_temp_inv_; }
  // The canvas the next forward reads (random, then renoised).
  std::span<const int32_t> canvas() const { return canvas_; }
  // The argmax canvas of the last step: the output once done().
  std::span<const int32_t> output() const { return argmax_; }

  // Takes the step's raw logits (canvas_length x n_vocab, row i for canvas
  // position i) and moves the canvas on. Must not be called when done().
  EntropyBoundStep Step(std::span<const float> logits);

 private:
  EntropyBoundSampler() = default;

  EntropyBoundConfig config_;
  int n_vocab_ = 0;
  std::mt19937 rng_;
  std::vector<int32_t> canvas_, argmax_, prev_argmax_, sampled_, renoise_, order_;
  std::vector<float> entropy_, uniform_;
  std::vector<uint8_t> accepted_;
  PerThread<std::vector<float>> weights_;  // (n_vocab) exp(z - max) of the row being scored
  float prev_temp_inv_ = 1.0f;
  int held_ = 0;
  int step_ = 0;
  bool done_ = false;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_ENTROPY_BOUND_SAMPLER_H_
