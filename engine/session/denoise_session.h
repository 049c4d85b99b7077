// DenoiseSession: one generation request end to end — a Denoiser's canvas
// (the masked samplers of LLaDA and Dream, or DiffusionGemma's
// entropy-bound renoising), the forward pass that feeds it, CFG's twin
// canvas, the cache policy, the history and per-step timings. The CLI's
// `generate` and the gRPC service both drive generations through it.
//
// Client-driven sessions (the Step RPC) add, beside Advance(): candidates
// for the positions a step committed, Forward() (candidates without
// committing), Commit() (client-chosen tokens) and Rewind() (back to an
// earlier point of the history). The history has one entry per Advance()
// and per Commit(); Rewind(n) restores exactly the state after n entries by
// restarting the sampler and re-applying them, so advancing again after a
// rewind reproduces the original run token for token (the sampler's random
// draws are keyed by seed, step and position).
//
// Caches (SamplerConfig::cache, opt-in): each sequence (two under CFG)
// keeps a KvCache of every layer's keys and values, and the session's
// CachePolicy (cache_policy.h) plans which rows each step computes through
// them. Forward() is always exact and leaves the cache alone.
//
// Positions: StepReport holds canvas positions (prompt included); the
// session operations below take and return positions in the generated
// region (0 = the first position after the prompt), as the API does.
#ifndef DLLM_ENGINE_SESSION_DENOISE_SESSION_H_
#define DLLM_ENGINE_SESSION_DENOISE_SESSION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/forward.h"
#include "engine/model/model.h"
#include "engine/sampler/candidates.h"
#include "engine/sampler/denoise_sampler.h"
#include "engine/sampler/entropy_bound_denoiser.h"
#include "engine/sampler/sampler_config.h"
#include "engine/session/cache_policy.h"
#include "engine/session/logits_source.h"

namespace dllm {

// What one Advance() did. Spans are valid until the next Advance().
struct StepReport {
  int step = 0;                        // 0-based
  std::span<const int32_t> positions;  // committed this step, ascending
  std::span<const int32_t> tokens;
  // Under LLaDA2.1's editing, what each position held before the step (the
  // token an edit replaced, or the mask); else the mask id for every
  // position (the entropy-bound denoiser's rewrites are not reported here).
  std::span<const int32_t> replaced;
  int block = 0;              // the denoiser's block when the step ran (Denoiser::block)
  int masked_remaining = 0;   // in the generated region
  int forward_passes = 0;     // canvases run: 0 (nothing to commit), 1, or 2 (CFG)
  int64_t rows_computed = 0;  // canvas rows the forward computed (CFG: both canvases)
  CacheUse cache_use = CacheUse::kNone;
  double forward_seconds = 0;
  double sample_seconds = 0;
  double step_seconds = 0;
  ForwardStats forward;  // the forward the step's canvases rode in (batched: the batch's)
};

// The most probable tokens at one position (candidates.h says what the
// probabilities are).
struct PositionCandidates {
  int position = 0;            // in the generated region
  std::vector<TokenProb> top;  // most probable first
};

// What one Forward() found.
struct ForwardReport {
  std::vector<PositionCandidates> candidates;  // in the order asked for
  int forward_passes = 0;                      // 0 (no positions), 1, or 2 (CFG)
  double forward_seconds = 0;
};

// What a session needs to know of its model: the sampler family and logit
// shift it implies, the special tokens, the vocabulary and the context.
struct SessionModel {
  SamplerFamily family = SamplerFamily::kLlada;
  bool shift_logits = false;
  SpecialTokens tokens;
  int n_vocab = 0;
  int64_t n_ctx = 0;
  // The K/V cache's shape: each layer's kv_dim (KvCache::LayerWidths).
  std::vector<int64_t> kv_widths;
  // How the model's sequences attend (prompt-causal: DiffusionGemma's
  // causal prompt encoder; its prompt_length is the session's prompt).
  MaskKind mask = MaskKind::kBidirectional;

  static SessionModel Of(const ModelConfig& config);
};

// The tokens a session's canvas starts with around its masks: the prompt
// and, for infill, the suffix after the generated region (committed from
// the start; DenoiseSampler::Create says how). A prompt alone converts.
struct CanvasInput {
  CanvasInput(std::vector<int32_t> prompt_tokens, std::vector<int32_t> suffix_tokens = {})
      : prompt(std::move(prompt_tokens)), suffix(std::move(suffix_tokens)) {}
  std::vector<int32_t> prompt;
  std::vector<int32_t> suffix;
};

// The client-driven operations (AdvanceWith, candidates and log-probs,
// Forward, Commit, Rewind) take masked denoising only: a denoiser that
// rewrites the whole canvas every step has no committed positions to
// choose, score or replay; they answer FAILED_PRECONDITION there.
//
// One thread at a time. The ForwardPass must have been created in the task
// arena that Advance() runs in; Forward() and StepCandidates() run in it too.
// A failed operation (any non-OK status except CANCELLED) changes nothing:
// the session stays usable.
class DenoiseSession {
 public:
  // Validates `config` and `caching` against the prompt and the model's
  // context, then sizes the sampler, a ForwardPass for the canvas (two
  // under CFG) and the K/V caches when `caching.cache` asks for them (the
  // default is exact decoding).
  static absl::StatusOr<std::unique_ptr<DenoiseSession>> Create(std::shared_ptr<const Model> model,
                                                                const SamplerConfig& config,
                                                                CanvasInput input,
                                                                const CachingOptions& caching = {});
  // Bytes Create() allocates for a canvas of `canvas` positions under
  // `config` and `caching`: the forward pass's activations, the K/V caches
  // and the logits (what admission reserves).
  static size_t MemoryBytes(const ModelConfig& model, const SamplerConfig& config,
                            const CachingOptions& caching, int canvas);
  // What a session keeps beside its forward pass's activations: the K/V
  // caches and the logits (MemoryBytes less ForwardPass::ActivationBytes).
  static size_t StateBytes(const ModelConfig& model, const SamplerConfig& config,
                           const CachingOptions& caching, int canvas);
  // The rows one forward of such a session computes at most: the canvas,
  // twice under CFG (the unconditional canvas rides in the same batch).
  static ForwardLimits Limits(const SamplerConfig& config, int canvas);
  // The most rows of logits a step asks for: one per generated position
  // (twice under CFG).
  static int LogitRows(const SamplerConfig& config);
  // A session whose forwards run through `pass`, which is someone else's
  // (the server's one pass for all requests) and outlives the session.
  // INVALID_ARGUMENT when the canvas needs more than the pass's limits.
  static absl::StatusOr<std::unique_ptr<DenoiseSession>> Create(std::shared_ptr<const Model> model,
                                                                const SamplerConfig& config,
                                                                CanvasInput input,
                                                                ForwardPass* pass,
                                                                const CachingOptions& caching = {});
  // The same session over any logits source (tests script the logits); the
  // family and shift of `model` override the config's, as above.
  static absl::StatusOr<std::unique_ptr<DenoiseSession>> Create(
      const SessionModel& model, const SamplerConfig& config, CanvasInput input,
      std::unique_ptr<LogitsSource> logits, const CachingOptions& caching = {});
  // A session of DiffusionGemma's entropy-bound denoiser over `prompt`
  // and canvas after canvas of config.canvas_length positions (`run`; its
  // stop ids and context are filled from `model` when empty). Its forwards
  // carry the self-conditioning input; under `caching.cache` kExact (the
  // model's default) the prompt and each finished canvas are encoded into
  // a K/V cache once, and each step computes only the rows after them.
  static absl::StatusOr<std::unique_ptr<DenoiseSession>> Create(
      const SessionModel& model, const EntropyBoundConfig& config, std::vector<int32_t> prompt,
      CanvasRun run, std::unique_ptr<LogitsSource> logits, const CachingOptions& caching = {});
  // The same over the model's own forward pass.
  static absl::StatusOr<std::unique_ptr<DenoiseSession>> Create(std::shared_ptr<const Model> model,
                                                                const EntropyBoundConfig& config,
                                                                std::vector<int32_t> prompt,
                                                                CanvasRun run,
                                                                const CachingOptions& caching);
  // The same through `pass`, someone else's (the server's), which outlives
  // the session. INVALID_ARGUMENT when the run needs more than its limits.
  static absl::StatusOr<std::unique_ptr<DenoiseSession>> Create(std::shared_ptr<const Model> model,
                                                                const EntropyBoundConfig& config,
                                                                std::vector<int32_t> prompt,
                                                                CanvasRun run, ForwardPass* pass,
                                                                const CachingOptions& caching);
  // The forward an entropy-bound session of this shape needs: positions
  // for the prompt and every canvas the run may reach, and rows for its
  // largest step (everything, without the cache).
  static ForwardLimits EntropyBoundLimits(const EntropyBoundConfig& config, int prompt_len,
                                          const CanvasRun& run, const CachingOptions& caching);
  // What such a session keeps beside its forward pass (admission reserves
  // it): the K/V cache of every position the run may reach, and two canvases
  // of logits (the step's, and the previous step's for self-conditioning).
  static size_t EntropyBoundStateBytes(const ModelConfig& model, const EntropyBoundConfig& config,
                                       int prompt_len, const CanvasRun& run,
                                       const CachingOptions& caching);

  bool done() const { return denoiser_->done(); }
  int steps() const { return denoiser_->step(); }  // steps taken
  // Runs one denoising step and appends it to the history.
  // FAILED_PRECONDITION when done(). CANCELLED if `check` stops the
  // forward (the session is then unusable).
  absl::StatusOr<StepReport> Advance(const LayerCheck* check = nullptr);

  // Advance() in two halves, for a caller that runs the forwards of many
  // sessions as one batch (the server). PlanStep() plans the step's forward
  // and returns its sequences (one, two under CFG; none when the step needs
  // no forward), their logits pointing into this session and `stop` on
  // each (see SequenceInput); valid until the next operation. The caller
  // runs them through a ForwardPass, alone or stacked with other sessions',
  // then calls FinishStep(), which samples and commits as Advance() does;
  // `forward` and `forward_seconds` are what that forward took. If the
  // forward fails, the next operation simply plans again: nothing changed.
  // PlanStep: FAILED_PRECONDITION when done(); FinishStep: unless the
  // session's last operation was PlanStep().
  absl::StatusOr<std::span<const SequenceInput>> PlanStep(const std::atomic<bool>* stop = nullptr);
  absl::StatusOr<StepReport> FinishStep(const ForwardStats& forward, double forward_seconds);
  // Teacher forcing: the step's forward as Advance() runs it (under the
  // session's cache rules), then a commit of `tokens` at `positions`
  // (canvas positions, ascending, masked) instead of the sampler's choice,
  // as one scheduled step: what another session's Advance() committed over
  // the same canvas. The cache-divergence harness drives a cached session
  // along an exact run with it. INVALID_ARGUMENT for a bad position or token.
  absl::StatusOr<StepReport> AdvanceWith(std::span<const int32_t> positions,
                                         std::span<const int32_t> tokens,
                                         const LayerCheck* check = nullptr);
  // The rows the last Advance() or AdvanceWith() read (canvas positions,
  // ascending) and their logits (rows x n_vocab, unguided: the conditional
  // canvas's under CFG). FAILED_PRECONDITION unless the session's last
  // operation was a successful advance.
  struct StepLogits {
    std::span<const int32_t> rows;
    std::span<const float> logits;
  };
  absl::StatusOr<StepLogits> LastStepLogits() const;

  // Candidates (1 <= k <= kMaxCandidates) for each position the last
  // Advance() committed, ascending, from the logits that step read (under
  // CFG: the guided logits). FAILED_PRECONDITION unless the session's last
  // operation was a successful Advance() (its logits are kept until the next
  // operation). O(n_vocab) per position.
  absl::StatusOr<std::vector<PositionCandidates>> StepCandidates(int k) const;
  // The log-probability (TokenLogProb) each token the last Advance()
  // committed had in the logits that step read, in StepReport order. Same
  // precondition as StepCandidates.
  absl::StatusOr<std::vector<double>> StepLogProbs() const;

  // One forward pass over the current canvas (two under CFG) and the top `k`
  // (1..kMaxCandidates) candidates at each of `positions` (unique, in the
  // generated region, masked or not; empty = every masked position,
  // ascending). Commits nothing, adds nothing to the history and leaves the
  // sampler's schedule as it was. Allowed after done(). INVALID_ARGUMENT
  // for a bad k or position.
  absl::StatusOr<ForwardReport> Forward(std::span<const int32_t> positions, int k,
                                        const LayerCheck* check = nullptr);
  // Forward() in two halves, as PlanStep() and FinishStep() split
  // Advance(): PlanForward() validates and returns the sequences to run
  // (none when no position is asked for or masked), valid until the next
  // operation; FinishForward() reads their logits into candidates.
  // FinishForward: FAILED_PRECONDITION unless the last operation was a
  // successful PlanForward().
  absl::StatusOr<std::span<const SequenceInput>> PlanForward(std::span<const int32_t> positions,
                                                             int k);
  absl::StatusOr<ForwardReport> FinishForward(double forward_seconds);

  // Writes client-chosen tokens[i] at positions[i] (generated region) as one
  // history entry that takes no scheduled step (DenoiseSampler::Commit says
  // how the schedule copes). INVALID_ARGUMENT: empty, sizes differ, position
  // outside the generated region or repeated, token outside the vocabulary
  // or the mask token. FAILED_PRECONDITION: done(), or a position that is
  // not masked. Each message names the position.
  absl::Status Commit(std::span<const int32_t> positions, std::span<const int32_t> tokens);

  // Restores the canvas and the sampler's schedule to exactly what they were
  // after the first `to_step` history entries (0 = the initial canvas) and
  // drops the later entries. FAILED_PRECONDITION beyond history_size().
  absl::Status Rewind(int to_step);

  // Advance() and Commit() calls in the history (what Rewind counts).
  int history_size() const { return static_cast<int>(history_.size()); }
  int gen_length() const { return denoiser_->gen_end() - denoiser_->prompt_len(); }
  // Masked positions in the generated region.
  int masked_remaining() const;

  // The whole canvas: prompt, generated region, suffix (infill).
  std::span<const int32_t> canvas() const { return denoiser_->canvas(); }
  // The generated region alone (what API positions index).
  std::span<const int32_t> generated() const {
    return canvas().subspan(static_cast<size_t>(prompt_len()), static_cast<size_t>(gen_length()));
  }
  int prompt_len() const { return denoiser_->prompt_len(); }
  // Where the request's generated region starts on the canvas (what API
  // positions count from): prompt_len(), except under the entropy-bound
  // denoiser, whose prompt_len() grows as finished canvases join the prompt.
  int request_prompt_len() const {
    return entropy_bound_ != nullptr ? entropy_bound_->original_prompt_len() : prompt_len();
  }
  int suffix_len() const { return static_cast<int>(canvas().size()) - denoiser_->gen_end(); }
  const SessionModel& model() const { return model_; }
  // The masked sampler (sessions of masked denoising only).
  const DenoiseSampler& sampler() const { return *sampler_; }
  // The entropy-bound denoiser, or null for masked denoising.
  const EntropyBoundDenoiser* entropy_bound() const { return entropy_bound_; }
  // The generated tokens that can no longer change, in output order: for
  // masked denoising the leading run of committed positions of the
  // generated region (stop tokens included; DenoiseSampler::Stable), for the entropy-bound
  // denoiser the finished canvases as kept (TrimCanvas).
  std::span<const int32_t> StableTokens() const;
  // The tokens that end the output (SpecialTokens::StopIds, as the denoiser has them).
  std::span<const int32_t> stop_ids() const;
  // The denoiser's output (Denoiser::Output): for masked denoising the
  // generated tokens up to the first stop token (EOS/EoT).
  std::span<const int32_t> OutputTokens() const;
  // Whether the loop stopped before its last scheduled step (early exit).
  bool exited_early() const;
  int forward_passes() const { return forward_passes_; }
  // Steps that computed the whole canvas under a cache (block starts,
  // refreshes, and the first step after the cache went stale).
  int cache_refreshes() const { return cache_policy_->refreshes(); }

 private:
  // `sampler`: `denoiser` as the masked sampler when it is one, else null.
  DenoiseSession(const SessionModel& model, std::unique_ptr<Denoiser> denoiser,
                 DenoiseSampler* sampler, std::unique_ptr<LogitsSource> source,
                 std::unique_ptr<CachePolicy> cache_policy);
  // FAILED_PRECONDITION naming `what` unless the denoiser is masked.
  absl::Status RequireMasked(const char* what) const;
  // The canvas as the cache policy plans from it.
  CanvasView View() const;
  // Advance(), committing `forced` (positions, tokens) when set instead of
  // the sampler's choice.
  struct Forced {
    std::span<const int32_t> positions, tokens;
  };
  absl::StatusOr<StepReport> Step(const LayerCheck* check, const Forced* forced);
  // FinishStep(), committing `forced` when set.
  absl::StatusOr<StepReport> Finish(const ForwardStats& forward, double forward_seconds,
                                    const Forced* forced);
  // Validates and sizes the session; `make_source` gets the limits a
  // forward for this canvas needs.
  static absl::StatusOr<std::unique_ptr<DenoiseSession>> Build(
      const SessionModel& model, const SamplerConfig& config, const CachingOptions& caching,
      CanvasInput input,
      const std::function<absl::StatusOr<std::unique_ptr<LogitsSource>>(ForwardLimits)>&
          make_source);

  // One history entry: `count` commits from `offset` in history_positions_ /
  // history_tokens_ (canvas positions), made by Advance() (scheduled) or by
  // Commit(). Flat arrays, reserved at Create(), so Advance() never allocates.
  struct HistoryEntry {
    bool scheduled = true;
    int offset = 0;
    int count = 0;
  };
  void Record(bool scheduled, std::span<const int32_t> positions, std::span<const int32_t> tokens);
  // Candidates for canvas position `p` from `logits` / `uncond`, which hold
  // the rows `rows` (ascending); `cfg_row` is n_vocab scratch under CFG.
  void CandidatesAt(int p, int k, std::span<const int32_t> rows, const float* logits,
                    const float* uncond, std::span<float> cfg_row, PositionCandidates* out) const;
  // Calls fn(i, cfg_row) in parallel for each position the last Advance()
  // committed (cfg_row: n_vocab scratch under CFG); FAILED_PRECONDITION
  // naming `what` unless the last operation was a successful Advance().
  template <typename Fn>
  absl::Status ForEachStepRow(const char* what, Fn fn) const;
  // The logits row canvas position `p` reads (guided into `cfg_row` under CFG).
  std::span<const float> RowAt(int p, std::span<const int32_t> rows, const float* logits,
                               const float* uncond, std::span<float> cfg_row) const;
  // Fills batch_ for `plan`: one sequence (two under CFG) computing the
  // canvas rows `range`, through the caches when `use_cache`.
  void PlanBatch(const DenoiserPlan& plan, RowRange range, bool use_cache,
                 const std::atomic<bool>* stop);
  // The unconditional logits under CFG: after the `n_rows` conditional rows.
  const float* UncondLogits(size_t n_rows) const;

  SessionModel model_;
  std::unique_ptr<Denoiser> denoiser_;
  DenoiseSampler* sampler_ = nullptr;              // denoiser_, when it is the masked sampler
  EntropyBoundDenoiser* entropy_bound_ = nullptr;  // denoiser_, when it is that
  std::unique_ptr<LogitsSource> source_;
  // (canvas, n_vocab): the most rows a step can ask for; under CFG twice
  // that, the conditional rows then the unconditional ones.
  std::vector<float> logits_;
  ForwardBatch batch_;
  // The step PlanStep() planned (valid until FinishStep or another operation).
  struct StepPlan {
    bool valid = false;
    DenoiserPlan step;  // what the denoiser asked for
    CachePlan cache;    // the rows it computes and how it uses the cache
    std::chrono::steady_clock::time_point start;
  };
  StepPlan plan_;
  // Caches (caching.cache != kNone at Create): the canvas's, and under CFG the
  // unconditional canvas's; the policy that plans their use.
  std::unique_ptr<KvCache> cache_, uncond_cache_;
  std::unique_ptr<CachePolicy> cache_policy_;
  std::vector<int32_t> positions_, tokens_, replaced_;
  std::vector<int32_t> before_;  // editing: the canvas before the step being finished
  int forward_passes_ = 0;

  std::vector<HistoryEntry> history_;
  std::vector<int32_t> history_positions_, history_tokens_;
  // The rows the last Advance() read; its logits (and uncond_) stay valid
  // while last_op_advanced_.
  std::vector<int32_t> last_rows_;
  bool last_op_advanced_ = false;
  std::vector<int32_t> forward_rows_;
  // The Forward() PlanForward() planned: the canvas positions asked for, in
  // order, and k.
  struct ForwardProbe {
    bool valid = false;
    int k = 0;
    std::vector<int32_t> positions;
  };
  ForwardProbe probe_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SESSION_DENOISE_SESSION_H_
