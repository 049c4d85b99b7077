// DenoiseSampler: one generation's canvas and the official LLaDA / Dream
// denoising loop as a step-by-step state machine, independent of the model.
// Each step it names the logits rows it needs (so the model runs its LM head
// on those rows only), then takes those rows and commits tokens.
//
// Driver loop (DenoiseSession::Advance runs exactly this):
//
//   DLLM_ASSIGN_OR_RETURN(DenoiseSampler s, DenoiseSampler::Create(...));
//   while (!s.done()) {
//     rows = s.rows();                       // ascending canvas rows
//     if (rows.empty()) { s.Step({}); continue; }   // commits nothing: no forward
//     logits = forward(s.canvas(), rows);    // rows.size() x n_vocab, float32
//     if (s.needs_unconditional()) uncond = forward(s.unconditional_canvas(), rows);
//     s.Step(logits, uncond);
//   }
//
// Rows: LLaDA reads row p for each eligible masked position p (masked and
// before the end of the current block). Dream reads row p-1 for each masked
// position p (row 0 for p = 0): Dream keeps the AR shift, position p's
// distribution is the model output at p-1. Duplicates are merged.
//
// Thread-safety: one thread at a time. Step() allocates nothing.
#ifndef DLLM_ENGINE_SAMPLER_DENOISE_SAMPLER_H_
#define DLLM_ENGINE_SAMPLER_DENOISE_SAMPLER_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/parallel/per_thread.h"
#include "engine/sampler/denoiser.h"
#include "engine/sampler/remasking.h"
#include "engine/sampler/sampler_config.h"

namespace dllm {

// Early exit: true when some position e >= prompt_len holds a stop token and
// no position in [prompt_len, e) is masked. Committed tokens are never
// changed again by any of the samplers, so from then on the first stop token
// stays at e and every token before it is final: the output cut at the first
// stop token is identical whether or not the loop continues. Tokens after e
// (and hence the full canvas) may still differ, so the identity holds only
// for output truncated at the first stop token. LLaDA's generate.py decodes
// the whole canvas skipping special tokens (samplers.md 3.4), which can
// include text after the EOS; that form is not preserved.
bool EarlyExitReached(std::span<const int32_t> canvas, int prompt_len, int32_t mask_id,
                      std::span<const int32_t> stop_ids);

// The generated tokens up to (not including) the first stop token.
std::span<const int32_t> OutputTokens(std::span<const int32_t> canvas, int prompt_len,
                                      std::span<const int32_t> stop_ids);

class DenoiseSampler : public Denoiser {
 public:
  // Validates `config` against the prompt and context and sizes every buffer.
  // `special.mask` is required; `special.eos` / `special.eot` (when >= 0)
  // are the stop tokens and the ids for LLaDA's EOS flags.
  //
  // Infill: a non-empty `suffix` follows the generated region on the canvas
  // (prompt, gen_length masks, suffix), committed from the start as a
  // client's Commit() before the first step would be, so the sampler fills
  // only the region between. It is part of the initial canvas, so Restart()
  // keeps it, and the unconditional canvas of CFG masks it with the prompt
  // (generate.py's prompt_index is every token of the initial canvas that
  // is not a mask).
  static absl::StatusOr<DenoiseSampler> Create(const SamplerConfig& config,
                                               const SpecialTokens& special,
                                               std::span<const int32_t> prompt, int n_vocab,
                                               int64_t n_ctx, std::span<const int32_t> suffix = {});

  bool done() const override { return done_; }
  // Done before the last scheduled step because early exit held (masks
  // remain after the first stop token).
  bool exited_early() const;
  int step() const override { return step_; }  // Step() calls so far
  // Current block (0 for Dream's official one-block run). LLaDA2 counts
  // blocks from canvas position 0 (block b is [b, b + 1) x block_length).
  int block() const override { return block_; }
  int window_end() const override;
  int block_length() const override { return config_.EffectiveBlockLength(); }
  int prompt_len() const override { return prompt_len_; }
  // The canvas's end of the generated region: the suffix (infill) starts
  // here. LLaDA2 generates to the end of the last block, past gen_length
  // (Output() keeps the first gen_length).
  int gen_end() const override { return prompt_len_ + config_.gen_length; }
  int suffix_len() const { return static_cast<int>(canvas_.size()) - gen_end(); }
  // The generated region of the canvas (the suffix excluded).
  std::span<const int32_t> generated() const {
    return std::span<const int32_t>(canvas_).subspan(prompt_len_, config_.gen_length);
  }
  int n_vocab() const { return n_vocab_; }
  const SamplerConfig& config() const { return config_; }
  std::span<const int32_t> canvas() const override { return canvas_; }
  std::span<const int32_t> stop_ids() const { return stop_ids_; }

  // The logits row the sampler reads for canvas position `p`: the row that
  // predicts it (PredictingRow), or row 0 for position 0 of a shifted model.
  int32_t LogitRowOf(int p) const { return std::max(0, PredictingRow(config_.shift_logits, p)); }

  // Rows (canvas positions, ascending, unique) whose logits the next Step()
  // reads. Empty when the step commits nothing; the forward is then skipped
  // (output-neutral, samplers.md 8.2).
  std::span<const int32_t> rows() const { return rows_; }
  // CFG: a second forward over unconditional_canvas() (prompt masked) is
  // needed, for the same rows.
  bool needs_unconditional() const { return config_.cfg_scale > 0 && !rows_.empty(); }
  std::span<const int32_t> unconditional_canvas() const { return uncond_canvas_; }
  // canvas() and rows(), with unconditional_canvas() under CFG.
  DenoiserPlan Plan() const override;
  // The generated tokens up to the first stop token (OutputTokens).
  std::span<const int32_t> Output() const override;
  // The leading generated tokens no later step can change: the run before
  // the first mask, and under LLaDA2.1's editing only the blocks before the
  // current one (a written position of the current block may be edited).
  std::span<const int32_t> Stable() const;

  // Commits this step's tokens. `logits` (and `uncond` under CFG) hold
  // rows().size() x n_vocab floats, row i for canvas row rows()[i]; empty
  // when rows() is. Must not be called when done().
  StepCommits Step(std::span<const float> logits, std::span<const float> uncond = {}) override;

  // Client-driven sessions (DenoiseSession's Commit and Rewind).
  //
  // Writes client-chosen `tokens` at canvas `positions` without taking a
  // step: the step counter (and with it every keyed random draw) is
  // unchanged, and the next step is planned again over the masks left. The
  // LLaDA block schedule, fixed at a block's first step, is kept: each later
  // step commits min(its scheduled count, masks left), and a block with no
  // masks left is finished (the next step works on the next block). A commit
  // before a block's first step reschedules that block over its remaining
  // masks; Dream's counts are computed from the masks left at every step.
  // Requires !done(), positions in the generated region and masked, tokens
  // in [0, n_vocab) and not the mask; the caller validates.
  void Commit(std::span<const int32_t> positions, std::span<const int32_t> tokens);
  // Re-applies a step that Step() once made, from the tokens it committed
  // (no logits): the state afterwards equals the state after that Step().
  // Requires !done().
  void ApplyStep(std::span<const int32_t> positions, std::span<const int32_t> tokens);
  // Back to the state Create() returned: the prompt and all masks, step 0.
  // Replaying the same Step / Commit history from here reproduces every
  // later state exactly, since the schedule and the random draws depend
  // only on (seed, step, position) and the canvas.
  void Restart();

 private:
  DenoiseSampler() = default;
  void PlanNext();  // fills rows_ and the candidates for step_, or sets done_
  // The family's candidates and count for step_; false when the run is over.
  bool PlanLladaStep();
  bool PlanDreamStep();
  bool PlanLlada2Step();
  // LLaDA2: which of the candidates (rows already scored) this step writes:
  // order_'s first entries, returned count.
  size_t ChooseLlada2();
  // LLaDA2.1: what a step that writes `positions` does to the block's
  // post-fill phase (noted before the write).
  void NoteLlada2Step(std::span<const int32_t> positions);
  bool RangeHasMask(int lo, int hi) const;
  void PreselectRandom();  // LLaDA's `random`: the count_ chosen by keyed uniforms
  void AssignRows();       // rows_ and candidate_row_ from candidates_
  void Write(std::span<const int32_t> positions, std::span<const int32_t> tokens);
  void EndStep();  // counts a step (LLaDA: moves through blocks), then Plan()s
  bool IsMasked(int p) const { return canvas_[p] == special_.mask; }
  bool BlockHasMask(int block) const;  // LLaDA

  SamplerConfig config_;
  SpecialTokens special_;
  int n_vocab_ = 0;
  int prompt_len_ = 0;
  std::vector<int32_t> canvas_;          // (prompt_len + gen_length + suffix)
  std::vector<int32_t> initial_canvas_;  // canvas_ at Create(), for Restart()
  std::vector<int32_t> uncond_canvas_;   // CFG only: canvas with prompt positions masked
  std::vector<int32_t> stop_ids_;
  bool done_ = false;
  int step_ = 0;
  int block_ = 0;                  // LLaDA, and Dream with blocks
  int step_in_block_ = 0;          // LLaDA, and Dream with blocks
  std::vector<int> block_counts_;  // LLaDA: (steps per block); LLaDA2: its even schedule
  // LLaDA2: the gen_length asked for (config_.gen_length runs to the end of
  // the last block); LLaDA2.1: post-fill steps taken in this block, and
  // whether the block is over (a post-fill step edited nothing).
  int output_length_ = 0;
  int post_steps_ = 0;
  bool block_closed_ = false;
  bool step_had_mask_ = false;
  bool step_edited_ = false;
  std::vector<float> timesteps_;  // Dream: (steps per block + 1)

  // The plan for step_: candidate positions, the row each reads, how many
  // to commit (-1: threshold rule), and whether the candidates are already
  // the chosen set (LLaDA random, Dream origin draw positions before the
  // forward, from the keyed RNG).
  std::vector<int32_t> rows_;
  std::vector<int32_t> candidates_;
  std::vector<int32_t> candidate_row_;  // index into rows_
  int count_ = 0;
  bool preselected_ = false;

  // Per-step scratch, sized at Create().
  std::vector<double> confidence_;  // per candidate
  std::vector<double> rank_key_;    // per candidate (alg_temp keys)
  std::vector<int32_t> token_;      // per candidate
  std::vector<int32_t> order_;      // candidate indices
  std::vector<int32_t> commit_positions_;
  std::vector<int32_t> commit_tokens_;
  // Rows are scored in parallel; each worker thread keeps its own buffers.
  struct WorkerScratch {
    explicit WorkerScratch(int n_vocab, bool cfg) : row(n_vocab), cfg_row(cfg ? n_vocab : 0) {}
    RowScratch row;
    std::vector<float> cfg_row;  // (n_vocab), CFG only
  };
  PerThread<WorkerScratch> scratch_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_DENOISE_SAMPLER_H_
