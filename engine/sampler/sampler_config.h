// SamplerConfig: the settings of one denoising generation, with the names of
// the official samplers (ML-GSAI/LLaDA generate.py, Dream's
// diffusion_generate). Validate() rejects bad settings before any work;
// semantics are in /work/shared/docs/samplers.md (sections 3 and 4).
#ifndef DLLM_ENGINE_SAMPLER_SAMPLER_CONFIG_H_
#define DLLM_ENGINE_SAMPLER_SAMPLER_CONFIG_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model_config.h"

namespace dllm {

// How masked positions are ranked for commitment. The first two are LLaDA's
// `remasking`, the others Dream's `alg`.
enum class Algorithm {
  kLowConfidence,  // LLaDA: softmax probability of the chosen token
  kRandom,         // LLaDA: uniform random confidence
  kOrigin,         // Dream: each masked position transfers with prob 1 - t[i+1]/t[i]
  kMaskgitPlus,    // Dream: top probability
  kTopkMargin,     // Dream: p_top1 - p_top2
  kEntropy,        // Dream: sum_v p log(p + 1e-10), lowest entropy first
  kSentinel,       // not an algorithm; keeps the name table in step
};
absl::string_view AlgorithmName(Algorithm algorithm);  // "low_confidence", "maskgit_plus", ...
absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name);
// Which official sampler a model's authors use: LLaDA's (blocks, Gumbel-max,
// low-confidence remasking: LLaDA, LLaDA-1.5, LLaDA-MoE) or Dream's
// (timestep schedule, entropy and friends: Dream, Dream-Coder, DiffuCoder,
// RND1).
// LLaDA2's (inclusionAI's LLaDA2.0 sampler: blocks from position 0,
// threshold commits over an even schedule; LLaDA2.1's adds token editing)
// is the third.
enum class SamplerFamily { kLlada, kDream, kLlada2 };
absl::string_view SamplerFamilyName(SamplerFamily family);  // "llada", "dream", "llada2"
SamplerFamily SamplerFamilyOf(Arch arch);

// Fast-dLLM's approximate K/V caches: a decoding option (CachingOptions), not
// a sampler setting (the sampler sees only logits); the session's
// CachePolicy says which rows each mode computes.
enum class CacheMode {
  kNone,    // every step computes every row: exact decoding
  kPrefix,  // the prompt and finished blocks are cached
  kDual,    // everything but the current block is cached
  // The model's exact cache: rows no later row changes are computed once
  // (DiffusionGemma's causal prompt, and each finished canvas); the
  // default where a model has one, refused where it has none.
  kExact,
  kSentinel,
};
absl::string_view CacheModeName(CacheMode mode);  // "none", "prefix", "dual", "exact"
absl::StatusOr<CacheMode> ParseCacheMode(absl::string_view name);

// Whether `algorithm` belongs to `family` (LLaDA: low_confidence, random).
bool AlgorithmFitsFamily(Algorithm algorithm, SamplerFamily family);
// "low_confidence, random" or "origin, maskgit_plus, topk_margin, entropy".
const char* FamilyAlgorithmNames(SamplerFamily family);

struct SamplerConfig {
  SamplerFamily family = SamplerFamily::kLlada;  // which official sampler
  int gen_length = 128;  // generated positions (Dream: max_new_tokens), e.g. 256
  int steps = 128;       // model calls without threshold, e.g. 256; <= gen_length
  // LLaDA semi-autoregressive block, e.g. 32; must divide gen_length, and
  // gen_length / block_length must divide steps. 0 means gen_length (one
  // block). Dream's official sampler has no blocks (0 or gen_length); a
  // smaller one opts Dream into Fast-dLLM's block-wise decoding, which
  // changes its schedule: blocks in order, each running Dream's timestep
  // schedule over its own steps (steps / number of blocks).
  int block_length = 0;
  Algorithm algorithm = Algorithm::kLowConfidence;
  float temperature = 0.0f;  // 0 = greedy; LLaDA: Gumbel-max, Dream: softmax(logits / T) draw
  float top_p = 1.0f;        // Dream only; 1 = off, e.g. 0.95 (applied even at T = 0)
  int top_k = 0;             // Dream only; 0 = off, e.g. 50
  float alg_temp = 0.0f;     // Dream only; > 0 draws positions from softmax(conf / alg_temp)
  float eps = 1e-3f;         // Dream timestep floor, linspace(1, eps, steps + 1)
  float cfg_scale = 0.0f;    // LLaDA only; classifier-free guidance, 0 = off
  // Fast-dLLM threshold parallel decoding, e.g. 0.9: commit the best eligible
  // position plus every eligible position with confidence >= threshold, until
  // the block (Dream: canvas) is done. `steps` then plays no part and the
  // number of model calls varies. Probability-valued confidences only.
  std::optional<float> threshold;
  // LLaDA flags of generate.py (samplers.md 3.4): EOS logit -inf; EOS/EoT
  // predictions get confidence 0 (T = 0: EOS and EoT; T > 0: EoT only).
  bool logits_eos_inf = false;
  bool confidence_eos_eot_inf = false;
  // The model's diffusion.shift_logits (ModelConfig; DenoiseSession copies
  // it): position p is predicted by logits row p - 1 (Dream, RND1).
  bool shift_logits = false;
  uint64_t seed = 0;        // keys every random draw (rng.h)
  bool early_exit = false;  // stop once EarlyExitReached() holds (denoise_sampler.h)

  // LLaDA2 (family kLlada2). Blocks of block_length (>= 1) count from canvas
  // position 0, so the prompt's tail shares the first generated block and
  // the canvas runs to the end of the block holding prompt + gen_length.
  // Each block runs at most steps_per_block forwards (the official `steps`)
  // over the schedule of the block's length split evenly; a step commits
  // every masked position whose probability is > threshold when at least
  // the schedule's count pass, else the count most probable. `steps` plays
  // no part; temperature, top_k then top_p filter the draw (T > 0 only).
  // early_exit stops after a block once the output ends in a stop token.
  int steps_per_block = 32;
  // LLaDA2.1's editing: set, each step also rewrites an already written
  // (not prompt) position of the block whose drawn token differs and has
  // probability > editing_threshold; a step commits the masked positions
  // above `threshold`, or the most probable one, and once a block is full
  // up to max_post_steps more steps may edit it (it ends at a step that
  // edits nothing). steps_per_block plays no part.
  std::optional<float> editing_threshold;
  int max_post_steps = 16;

  // Self-consistency of the settings; errors name the field and its value.
  absl::Status Validate() const;
  // Validate() plus the canvas: a non-empty prompt and prompt_len +
  // gen_length + suffix_len (infill) <= n_ctx (the model's context, e.g. 4096).
  absl::Status ValidateForCanvas(int prompt_len, int64_t n_ctx, int suffix_len = 0) const;

  // gen_length when block_length is 0.
  int EffectiveBlockLength() const { return block_length == 0 ? gen_length : block_length; }
  int NumBlocks() const { return gen_length / EffectiveBlockLength(); }
  int StepsPerBlock() const { return steps / NumBlocks(); }
  // The steps a run is scheduled for: `steps`, or 0 (unknown in advance)
  // under threshold decoding and for LLaDA2.
  int PlannedSteps() const { return threshold || family == SamplerFamily::kLlada2 ? 0 : steps; }
  // LLaDA2: the canvas of a prompt of `prompt_len`: whole blocks up to the
  // one holding the last generated position.
  int Llada2CanvasLength(int prompt_len) const {
    const int b = block_length;
    return (prompt_len + gen_length + b - 1) / b * b;
  }
};

// How a session computes its steps' logits, beside the sampler's settings
// (which say what it does with them).
struct CachingOptions {
  // Approximate decoding from K/V caches (opt-in; kNone is exact). A block's
  // first step computes the whole canvas and fills the cache; so does every
  // `cache_refresh_steps`-th step inside a block (0: only the first; 1: every
  // step, which is exact decoding).
  CacheMode cache = CacheMode::kNone;
  int cache_refresh_steps = 0;

  // Errors name the field and its value.
  absl::Status Validate() const;
};

// gen_length when a request or command line gives none.
inline constexpr int kDefaultGenLength = 128;
// LLaDA's semi-autoregressive block when a request gives none.
inline constexpr int kDefaultBlockLength = 32;

// The block a LLaDA-family request gets by default: `preferred` where it
// divides gen_length, else one block of the whole generation (0). Dream's
// family takes no blocks by default (0).
int DefaultBlockLength(SamplerFamily family, int gen_length, int preferred = kDefaultBlockLength);

// The block an infill span gets where the request names none (llama-server's
// /infill): the largest in [kMinInfillBlock, kMaxInfillBlock] that divides
// the span and whose block count divides `steps`; 0 (the family's default)
// when none does. Blocks commit left to right, so the span's front is
// committed early, which a time budget (t_max_predict_ms) can return.
inline constexpr int kMinInfillBlock = 8;
inline constexpr int kMaxInfillBlock = 16;
int InfillBlockLength(int span, int steps);

// LLaDA2.0's official thresholds (generate(), the model card), and the
// LLaDA2.1 model card's two presets: S (speed) and Q (quality).
inline constexpr float kLlada2Threshold = 0.95f;
struct Llada21Preset {
  const char* name;
  float threshold;
  float editing_threshold;
};
inline constexpr Llada21Preset kLlada21Presets[] = {{"S", 0.5f, 0.0f}, {"Q", 0.7f, 0.5f}};

// The settings every front end (CLI, server, bench, the proto's documented
// defaults) starts from for a model of `arch`: its family's algorithm
// (low_confidence / entropy), steps = gen_length, LLaDA blocks of 32 where
// they divide gen_length, greedy, early exit on; LLaDA2: blocks of 32,
// 32 steps a block, threshold 0.95.
SamplerConfig DefaultSamplerConfig(Arch arch, int gen_length);
// The same with the model's own defaults where it has them (LLaDA2's
// block length, ModelConfig::block_length).
SamplerConfig DefaultSamplerConfig(const ModelConfig& model, int gen_length);

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_SAMPLER_CONFIG_H_
