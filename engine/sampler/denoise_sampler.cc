// The LLaDA (generate.py) and Dream (diffusion_generate) denoising loops as a
// state machine; see denoise_sampler.h. Ranking is always (confidence desc,
// position asc), the CUDA top-k choice among boundary ties.
#include "engine/sampler/denoise_sampler.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/sampler/rng.h"
#include "engine/sampler/schedule.h"

namespace dllm {

bool EarlyExitReached(std::span<const int32_t> canvas, int prompt_len, int32_t mask_id,
                      std::span<const int32_t> stop_ids) {
  for (size_t p = static_cast<size_t>(std::max(prompt_len, 0)); p < canvas.size(); ++p) {
    if (canvas[p] == mask_id) return false;
    if (std::find(stop_ids.begin(), stop_ids.end(), canvas[p]) != stop_ids.end()) return true;
  }
  return false;
}

std::span<const int32_t> OutputTokens(std::span<const int32_t> canvas, int prompt_len,
                                      std::span<const int32_t> stop_ids) {
  const auto gen = canvas.subspan(std::min<size_t>(std::max(prompt_len, 0), canvas.size()));
  size_t n = 0;
  while (n < gen.size() && std::find(stop_ids.begin(), stop_ids.end(), gen[n]) == stop_ids.end()) {
    ++n;
  }
  return gen.first(n);
}

absl::StatusOr<DenoiseSampler> DenoiseSampler::Create(const SamplerConfig& config,
                                                      const SpecialTokens& special,
                                                      std::span<const int32_t> prompt, int n_vocab,
                                                      int64_t n_ctx,
                                                      std::span<const int32_t> suffix) {
  DLLM_RETURN_IF_ERROR(config.ValidateForCanvas(static_cast<int>(prompt.size()), n_ctx,
                                                static_cast<int>(suffix.size())));
  if (n_vocab <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("sampler: n_vocab ", n_vocab, " must be > 0"));
  }
  if (special.mask < 0) {
    return absl::InvalidArgumentError("sampler: the model has no mask token");
  }
  DenoiseSampler s;
  s.config_ = config;
  s.special_ = special;
  s.n_vocab_ = n_vocab;
  s.prompt_len_ = static_cast<int>(prompt.size());
  s.output_length_ = config.gen_length;
  if (config.family == SamplerFamily::kLlada2) {
    // The canvas runs to the end of the block holding the last position.
    s.config_.gen_length = config.Llada2CanvasLength(s.prompt_len_) - s.prompt_len_;
  }
  const int len = s.prompt_len_ + s.config_.gen_length + static_cast<int>(suffix.size());
  s.canvas_.assign(prompt.begin(), prompt.end());
  s.canvas_.resize(s.prompt_len_ + s.config_.gen_length, special.mask);
  s.canvas_.insert(s.canvas_.end(), suffix.begin(), suffix.end());
  s.initial_canvas_ = s.canvas_;
  if (config.cfg_scale > 0) {
    // generate.py: prompt_index = (x != mask) on the initial canvas.
    s.uncond_canvas_ = s.canvas_;
    for (int32_t& t : s.uncond_canvas_) t = special.mask;
  }
  s.stop_ids_ = special.StopIds();
  if (config.family == SamplerFamily::kLlada2) {
    // The official `steps = min(steps_per_block, gen_length // minimal_topk)`
    // (minimal_topk 1), each block's length split evenly over them.
    s.block_counts_.resize(std::min(config.steps_per_block, config.gen_length));
    LladaBlockSchedule(config.block_length, static_cast<int>(s.block_counts_.size()),
                       s.block_counts_);
    s.block_ = s.prompt_len_ / config.block_length;
  } else if (config.family == SamplerFamily::kLlada) {
    s.block_counts_.resize(config.StepsPerBlock());
  } else {
    // One block (the official sampler) or Fast-dLLM's blocks: the schedule
    // runs over each block's steps.
    s.timesteps_ = DreamTimesteps(config.StepsPerBlock(), config.eps);
  }
  s.rows_.reserve(len);
  s.candidates_.reserve(len);
  s.candidate_row_.reserve(len);
  s.confidence_.resize(len);
  s.rank_key_.resize(len);
  s.token_.resize(len);
  s.order_.reserve(len);
  s.commit_positions_.reserve(len);
  s.commit_tokens_.reserve(len);
  s.scratch_ = PerThread<WorkerScratch>(n_vocab, config.cfg_scale > 0);
  s.PlanNext();
  return s;
}

void DenoiseSampler::PlanNext() {
  rows_.clear();
  candidates_.clear();
  candidate_row_.clear();
  count_ = 0;
  preselected_ = false;
  if (config_.family == SamplerFamily::kLlada2) {
    // Its own block and stop rules: a full block may still take LLaDA2.1's
    // editing steps.
    if (PlanLlada2Step()) {
      AssignRows();
    } else {
      done_ = true;
    }
    return;
  }
  const int len = static_cast<int>(canvas_.size());
  int n_masked = 0;
  for (int p = 0; p < len; ++p) n_masked += IsMasked(p) ? 1 : 0;
  // Nothing masked: every remaining step would commit nothing.
  if (n_masked == 0 ||
      (config_.early_exit && EarlyExitReached(std::span<const int32_t>(canvas_).first(gen_end()),
                                              prompt_len_, special_.mask, stop_ids_))) {
    done_ = true;
    return;
  }
  const bool planned = config_.family == SamplerFamily::kLlada ? PlanLladaStep() : PlanDreamStep();
  if (!planned) {
    done_ = true;
    return;
  }
  AssignRows();
}

bool DenoiseSampler::PlanLladaStep() {
  const int len = static_cast<int>(canvas_.size());
  const bool threshold = config_.threshold.has_value();
  const int block_length = config_.EffectiveBlockLength();
  // A block whose masks are all gone is finished, whatever steps it had
  // left. Only client commits (Commit()) can empty a block early: on its
  // own the schedule commits a block's last masks at its last step (and
  // threshold mode closes a block in the step that fills it), so this never
  // changes a run without client commits.
  while (block_ < config_.NumBlocks() && !BlockHasMask(block_)) {
    ++block_;
    step_in_block_ = 0;
  }
  if (block_ >= config_.NumBlocks() || (threshold && step_ >= 2 * len)) return false;
  const int lo = prompt_len_ + block_ * block_length;
  const int hi = lo + block_length;
  if (step_in_block_ == 0 && !threshold) {
    int m = 0;
    for (int p = lo; p < hi; ++p) m += IsMasked(p) ? 1 : 0;
    LladaBlockSchedule(m, config_.StepsPerBlock(), block_counts_);
  }
  for (int p = 0; p < hi; ++p) {
    if (IsMasked(p)) candidates_.push_back(p);
  }
  count_ = threshold ? -1 : std::min<int>(block_counts_[step_in_block_], candidates_.size());
  if (count_ == 0) candidates_.clear();
  if (config_.algorithm == Algorithm::kRandom && count_ > 0) PreselectRandom();
  return true;
}

bool DenoiseSampler::PlanLlada2Step() {
  const int bl = config_.block_length;
  const int n_blocks = static_cast<int>(canvas_.size()) / bl;
  const bool editing = config_.editing_threshold.has_value();
  while (true) {
    if (block_ >= n_blocks) return false;
    const int lo = block_ * bl, hi = lo + bl;
    const bool has_mask = RangeHasMask(lo, hi);
    // 2.0: a block ends when its masks are gone (or its steps, which the
    // schedule makes the same); 2.1: at a post-fill step that edits
    // nothing, or after max_post_steps of them.
    const bool finished =
        editing ? block_closed_ || (!has_mask && post_steps_ >= config_.max_post_steps)
                : !has_mask || step_in_block_ >= static_cast<int>(block_counts_.size());
    if (!finished) {
      for (int p = std::max(lo, prompt_len_); p < hi; ++p) {
        if (editing || IsMasked(p)) candidates_.push_back(p);
      }
      count_ = editing ? -1 : block_counts_[step_in_block_];
      return true;
    }
    ++block_;
    step_in_block_ = 0;
    post_steps_ = 0;
    block_closed_ = false;
    // The official generate() stops after a block once the output holds a
    // stop token (every position before it written).
    if (config_.early_exit &&
        EarlyExitReached(std::span<const int32_t>(canvas_).first(static_cast<size_t>(hi)),
                         prompt_len_, special_.mask, stop_ids_)) {
      return false;
    }
  }
}

bool DenoiseSampler::RangeHasMask(int lo, int hi) const {
  for (int p = lo; p < hi; ++p) {
    if (IsMasked(p)) return true;
  }
  return false;
}

int DenoiseSampler::window_end() const {
  const int len = static_cast<int>(canvas_.size());
  if (config_.family != SamplerFamily::kLlada2) return len;
  return std::min(len, (block_ + 1) * config_.block_length);
}

size_t DenoiseSampler::ChooseLlada2() {
  const size_t n = candidates_.size();
  // Strict >, in float, as the official samplers compare.
  const auto passes = [&](size_t i, std::optional<float> tau) {
    return tau.has_value() && static_cast<float>(confidence_[i]) > *tau;
  };
  const auto better = [&](int32_t a, int32_t b) {
    return confidence_[a] > confidence_[b] || (confidence_[a] == confidence_[b] && a < b);
  };
  size_t chosen = 0;
  // Masked candidates above the threshold first, in position order.
  for (size_t i = 0; i < n; ++i) {
    if (IsMasked(candidates_[i]) && passes(i, config_.threshold)) {
      order_[chosen++] = static_cast<int32_t>(i);
    }
  }
  // Too few: the count best masked ones instead (2.0: the schedule's count;
  // 2.1: num_to_transfer, 1).
  const size_t want = config_.editing_threshold ? 1 : static_cast<size_t>(count_);
  if (chosen < want) {
    chosen = 0;
    for (size_t i = 0; i < n; ++i) {
      if (IsMasked(candidates_[i])) order_[chosen++] = static_cast<int32_t>(i);
    }
    const size_t take = std::min(want, chosen);
    std::partial_sort(order_.begin(), order_.begin() + take, order_.begin() + chosen, better);
    chosen = take;
  }
  // 2.1's edits: a written position whose drawn token differs, above the
  // editing threshold.
  if (config_.editing_threshold) {
    for (size_t i = 0; i < n; ++i) {
      const int32_t p = candidates_[i];
      if (!IsMasked(p) && token_[i] != canvas_[p] && passes(i, config_.editing_threshold)) {
        order_[chosen++] = static_cast<int32_t>(i);
      }
    }
  }
  return chosen;
}

void DenoiseSampler::NoteLlada2Step(std::span<const int32_t> positions) {
  const int lo = block_ * config_.block_length;
  step_had_mask_ = RangeHasMask(lo, lo + config_.block_length);
  step_edited_ =
      std::any_of(positions.begin(), positions.end(), [&](int32_t p) { return !IsMasked(p); });
}

void DenoiseSampler::PreselectRandom() {
  // generate.py draws a uniform confidence per position: the choice needs
  // no logits, so only the chosen rows are computed.
  order_.resize(candidates_.size());
  for (size_t i = 0; i < candidates_.size(); ++i) {
    rank_key_[i] = RngUniform(config_.seed, RngStream::kConfidence, step_, candidates_[i]);
    order_[i] = static_cast<int32_t>(i);
  }
  std::partial_sort(order_.begin(), order_.begin() + count_, order_.end(),
                    [&](int32_t a, int32_t b) {
                      return rank_key_[a] > rank_key_[b] || (rank_key_[a] == rank_key_[b] && a < b);
                    });
  std::sort(order_.begin(), order_.begin() + count_);
  for (int i = 0; i < count_; ++i) candidates_[i] = candidates_[order_[i]];
  candidates_.resize(count_);
  preselected_ = true;
}

bool DenoiseSampler::PlanDreamStep() {
  const int len = static_cast<int>(canvas_.size());
  const bool threshold = config_.threshold.has_value();
  // The official sampler: every masked position of the canvas is eligible
  // and the timesteps run over all the steps. Fast-dLLM's block-wise
  // decoding (block_length < gen_length): blocks in order, as LLaDA's, each
  // running the official schedule over its own steps; a block its masks
  // have left (client commits) is finished.
  const bool blocks = config_.NumBlocks() > 1;
  if (blocks) {
    while (block_ < config_.NumBlocks() && !BlockHasMask(block_)) {
      ++block_;
      step_in_block_ = 0;
    }
    if (block_ >= config_.NumBlocks() || (threshold && step_ >= 2 * len)) return false;
  } else if (step_ >= (threshold ? 2 * len : config_.steps)) {
    // Under threshold the loop ends when nothing is masked; the cap only
    // guards a model that keeps predicting the mask token itself (which
    // leaves a position masked).
    return false;
  }
  const int lo = blocks ? prompt_len_ + block_ * config_.EffectiveBlockLength() : 0;
  const int hi = blocks ? lo + config_.EffectiveBlockLength() : len;
  for (int p = lo; p < hi; ++p) {
    if (IsMasked(p)) candidates_.push_back(p);
  }
  // The timestep index within the block; random draws stay keyed by step_.
  const int t = blocks ? step_in_block_ : step_;
  if (threshold) {
    count_ = -1;
  } else if (config_.algorithm == Algorithm::kOrigin) {
    // p_transfer = 1 - t[i+1]/t[i] (1 at the last step), drawn per position.
    const float p_transfer = DreamTransferFraction(timesteps_, t);
    size_t kept = 0;
    for (int32_t p : candidates_) {
      if (RngUniform(config_.seed, RngStream::kTransfer, step_, p) < p_transfer) {
        candidates_[kept++] = p;
      }
    }
    candidates_.resize(kept);
    count_ = static_cast<int>(kept);
    preselected_ = true;
  } else {
    count_ = DreamTransferCount(timesteps_, t, static_cast<int>(candidates_.size()));
    if (count_ == 0) candidates_.clear();
  }
  return true;
}

void DenoiseSampler::AssignRows() {
  for (int32_t p : candidates_) {
    const int32_t row = LogitRowOf(p);
    if (rows_.empty() || rows_.back() != row) rows_.push_back(row);
    candidate_row_.push_back(static_cast<int32_t>(rows_.size()) - 1);
  }
}

bool DenoiseSampler::BlockHasMask(int block) const {
  const int lo = prompt_len_ + block * config_.EffectiveBlockLength();
  return RangeHasMask(lo, lo + config_.EffectiveBlockLength());
}

bool DenoiseSampler::exited_early() const {
  if (!done_ || !config_.early_exit) return false;
  const bool masks_left = std::find(canvas_.begin(), canvas_.end(), special_.mask) != canvas_.end();
  return masks_left && EarlyExitReached(std::span<const int32_t>(canvas_).first(gen_end()),
                                        prompt_len_, special_.mask, stop_ids_);
}

StepCommits DenoiseSampler::Step(std::span<const float> logits, std::span<const float> uncond) {
  DLLM_CHECK(!done_);
  const size_t v = static_cast<size_t>(n_vocab_);
  DLLM_CHECK(logits.size() == rows_.size() * v);
  if (needs_unconditional()) DLLM_CHECK(uncond.size() == logits.size());
  const size_t n = candidates_.size();

  // Rows are independent and every random draw is keyed by (seed, step,
  // position), so scoring them in parallel gives the same result as in order.
  tbb::parallel_for(size_t{0}, n, [&](size_t i) {
    WorkerScratch& scratch = scratch_.Local();
    const size_t r = static_cast<size_t>(candidate_row_[i]);
    std::span<const float> row = logits.subspan(r * v, v);
    if (needs_unconditional()) {
      CombineCfg(row, uncond.subspan(r * v, v), config_.cfg_scale, scratch.cfg_row);
      row = scratch.cfg_row;
    }
    const RowKey key{config_.seed, step_, candidates_[i]};
    const RowScore score = config_.family == SamplerFamily::kLlada
                               ? ScoreLladaRow(row, config_, special_.eos, special_.eot, key)
                           : config_.family == SamplerFamily::kLlada2
                               ? ScoreLlada2Row(row, config_, key, &scratch.row)
                               : ScoreDreamRow(row, config_, key, &scratch.row);
    confidence_[i] = score.confidence;
    token_[i] = score.token;
  });

  // Choose: order_ holds candidate indices, the chosen ones first.
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) order_[i] = static_cast<int32_t>(i);
  size_t chosen = 0;
  if (config_.family == SamplerFamily::kLlada2) {
    chosen = ChooseLlada2();
  } else if (preselected_) {
    chosen = n;
  } else if (n > 0) {
    const double* key = confidence_.data();
    if (config_.alg_temp > 0) {
      // Dream: multinomial without replacement over softmax(conf / alg_temp),
      // drawn as Gumbel-top-k (same distribution).
      for (size_t i = 0; i < n; ++i) {
        const double u = RngUniform(config_.seed, RngStream::kPosition, step_, candidates_[i]);
        rank_key_[i] = confidence_[i] / config_.alg_temp - std::log(-std::log(u));
      }
      key = rank_key_.data();
    }
    // Candidates are in position order, so index order is position order.
    auto better = [key](int32_t a, int32_t b) {
      return key[a] > key[b] || (key[a] == key[b] && a < b);
    };
    if (count_ < 0) {
      std::sort(order_.begin(), order_.end(), better);
      chosen = 1;
      const double tau = *config_.threshold;
      while (chosen < n && confidence_[order_[chosen]] >= tau) ++chosen;
    } else {
      chosen = std::min(static_cast<size_t>(count_), n);
      std::partial_sort(order_.begin(), order_.begin() + chosen, order_.end(), better);
    }
  }
  std::sort(order_.begin(), order_.begin() + chosen);

  commit_positions_.clear();
  commit_tokens_.clear();
  for (size_t j = 0; j < chosen; ++j) {
    const int32_t i = order_[j];
    commit_positions_.push_back(candidates_[i]);
    commit_tokens_.push_back(token_[i]);
  }
  if (config_.family == SamplerFamily::kLlada2) NoteLlada2Step(commit_positions_);
  Write(commit_positions_, commit_tokens_);
  EndStep();
  return StepCommits{commit_positions_, commit_tokens_};
}

void DenoiseSampler::Write(std::span<const int32_t> positions, std::span<const int32_t> tokens) {
  DLLM_CHECK(positions.size() == tokens.size());
  for (size_t j = 0; j < positions.size(); ++j) {
    canvas_[positions[j]] = tokens[j];
    if (!uncond_canvas_.empty()) uncond_canvas_[positions[j]] = tokens[j];
  }
}

void DenoiseSampler::EndStep() {
  ++step_;
  if (config_.family == SamplerFamily::kLlada2) {
    ++step_in_block_;
    if (config_.editing_threshold && !step_had_mask_) {
      ++post_steps_;
      block_closed_ = !step_edited_;
    }
  } else if (config_.family == SamplerFamily::kLlada || config_.NumBlocks() > 1) {
    ++step_in_block_;
    const bool block_finished = config_.threshold.has_value()
                                    ? !BlockHasMask(block_)
                                    : step_in_block_ == config_.StepsPerBlock();
    if (block_finished) {
      ++block_;
      step_in_block_ = 0;
    }
  }
  PlanNext();
}

void DenoiseSampler::ApplyStep(std::span<const int32_t> positions,
                               std::span<const int32_t> tokens) {
  DLLM_CHECK(!done_);
  if (config_.family == SamplerFamily::kLlada2) NoteLlada2Step(positions);
  Write(positions, tokens);
  EndStep();
}

void DenoiseSampler::Commit(std::span<const int32_t> positions, std::span<const int32_t> tokens) {
  DLLM_CHECK(!done_);
  for (int32_t p : positions) {
    DLLM_CHECK(p >= prompt_len_ && p < gen_end() && IsMasked(p));
  }
  for (int32_t t : tokens) DLLM_CHECK(t >= 0 && t < n_vocab_ && t != special_.mask);
  Write(positions, tokens);
  // The step's plan (rows, candidates, count) depended on the masks; the
  // block schedule, fixed at the block's first step, is kept (see header).
  PlanNext();
}

void DenoiseSampler::Restart() {
  canvas_ = initial_canvas_;
  if (!uncond_canvas_.empty()) {
    for (int32_t& t : uncond_canvas_) t = special_.mask;
  }
  done_ = false;
  step_ = 0;
  block_ = config_.family == SamplerFamily::kLlada2 ? prompt_len_ / config_.block_length : 0;
  step_in_block_ = 0;
  post_steps_ = 0;
  block_closed_ = false;
  PlanNext();
}

DenoiserPlan DenoiseSampler::Plan() const {
  DenoiserPlan plan;
  plan.canvas = std::span<const int32_t>(canvas_).first(static_cast<size_t>(window_end()));
  plan.logit_rows = rows_;
  if (needs_unconditional()) plan.uncond_canvas = uncond_canvas_;
  return plan;
}

std::span<const int32_t> DenoiseSampler::Stable() const {
  const std::span<const int32_t> gen = generated();
  size_t n = static_cast<size_t>(std::find(gen.begin(), gen.end(), special_.mask) - gen.begin());
  if (config_.editing_threshold && !done_) {
    const int block_begin = block_ * config_.block_length;
    n = std::min(n, static_cast<size_t>(std::max(0, block_begin - prompt_len_)));
  }
  return gen.first(n);
}

std::span<const int32_t> DenoiseSampler::Output() const {
  return OutputTokens(
      std::span<const int32_t>(canvas_).first(static_cast<size_t>(prompt_len_ + output_length_)),
      prompt_len_, stop_ids_);
}

}  // namespace dllm
