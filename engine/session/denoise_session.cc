// DenoiseSession: Advance, and the client-driven operations (candidates,
// Forward, Commit, Rewind over a replayable history); see denoise_session.h.
#include "engine/session/denoise_session.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/base/stopwatch.h"
#include "engine/sampler/entropy_bound_denoiser.h"
#include "engine/sampler/remasking.h"
#include "engine/tokenizer/special_tokens.h"

namespace dllm {
namespace {

using Clock = MonotonicClock;

absl::Status CheckTopK(int k) {
  if (k < 1 || k > kMaxCandidates) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_candidates: ", k, " is outside [1, ", kMaxCandidates, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

SessionModel SessionModel::Of(const ModelConfig& c) {
  return SessionModel{SamplerFamilyOf(c.arch),
                      c.shift_logits,
                      c.tokens,
                      static_cast<int>(c.n_vocab),
                      c.n_ctx_train,
                      KvCache::LayerWidths(c),
                      c.traits().gemma     ? MaskKind::kPromptCausal
                      : c.block_length > 0 ? MaskKind::kBlockCausal
                                           : MaskKind::kBidirectional};
}

ForwardLimits DenoiseSession::Limits(const SamplerConfig& config, int canvas) {
  return {config.cfg_scale > 0 ? 2 * canvas : canvas, canvas};
}

int DenoiseSession::LogitRows(const SamplerConfig& config) {
  // LLaDA2 scores one block at a time.
  if (config.family == SamplerFamily::kLlada2) return config.block_length;
  return (config.cfg_scale > 0 ? 2 : 1) * config.gen_length;
}

size_t DenoiseSession::StateBytes(const ModelConfig& model, const SamplerConfig& config,
                                  const CachingOptions& caching, int canvas) {
  const size_t caches = caching.cache == CacheMode::kNone ? 0
                        : config.cfg_scale > 0            ? 2 * KvCache::BytesFor(model, canvas)
                                                          : KvCache::BytesFor(model, canvas);
  const size_t logits =
      static_cast<size_t>(LogitRows(config)) * static_cast<size_t>(model.n_vocab) * sizeof(float);
  return caches + logits;
}

size_t DenoiseSession::MemoryBytes(const ModelConfig& model, const SamplerConfig& config,
                                   const CachingOptions& caching, int canvas) {
  return ForwardPass::ActivationBytes(model, Limits(config, canvas)) +
         StateBytes(model, config, caching, canvas);
}

absl::StatusOr<std::unique_ptr<DenoiseSession>> DenoiseSession::Create(
    std::shared_ptr<const Model> model, const SamplerConfig& config, CanvasInput input,
    ForwardPass* pass, const CachingOptions& caching) {
  return Build(SessionModel::Of(model->config()), config, caching, std::move(input),
               [&](ForwardLimits limits) -> absl::StatusOr<std::unique_ptr<LogitsSource>> {
                 const ForwardLimits& has = pass->limits();
                 if (has.max_positions < limits.max_positions || has.max_rows < limits.max_rows) {
                   return absl::InvalidArgumentError(absl::StrCat(
                       "the canvas of ", limits.max_positions, " tokens needs ", limits.max_rows,
                       " rows a step; the engine's forward takes ", has.max_rows,
                       " rows and canvases of up to ", has.max_positions, " tokens"));
                 }
                 return SharedForwardLogits(pass);
               });
}

absl::StatusOr<std::unique_ptr<DenoiseSession>> DenoiseSession::Create(
    std::shared_ptr<const Model> model, const SamplerConfig& config, CanvasInput input,
    const CachingOptions& caching) {
  return Build(SessionModel::Of(model->config()), config, caching, std::move(input),
               [&](ForwardLimits limits) -> absl::StatusOr<std::unique_ptr<LogitsSource>> {
                 DLLM_ASSIGN_OR_RETURN(std::unique_ptr<ForwardPass> pass,
                                       ForwardPass::Create(model, limits));
                 return ForwardLogits(std::move(pass));
               });
}

namespace {

// `source`, when it takes a canvas and a batch of `limits`.
absl::StatusOr<std::unique_ptr<LogitsSource>> SourceFor(std::unique_ptr<LogitsSource> source,
                                                        ForwardLimits limits) {
  const ForwardLimits has = source->limits();
  if (has.max_positions < limits.max_positions || has.max_rows < limits.max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("the logits source takes ", has.max_positions, " tokens and ", has.max_rows,
                     " rows, the canvas needs ", limits.max_positions, " and ", limits.max_rows));
  }
  return source;
}

// Every fixed token is in the vocabulary and not the mask: a mask would be
// a position the sampler generates into (the official samplers take every
// mask on the canvas as one).
absl::Status CheckFixedTokens(const SessionModel& model, const char* what,
                              const std::vector<int32_t>& tokens) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (std::string why = NotAGivenToken(tokens[i], model.n_vocab, model.tokens.mask);
        !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " token ", tokens[i], " at index ", i, " ", why));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DenoiseSession>> DenoiseSession::Create(
    const SessionModel& model, const SamplerConfig& config, CanvasInput input,
    std::unique_ptr<LogitsSource> logits, const CachingOptions& caching) {
  return Build(model, config, caching, std::move(input),
               [&](ForwardLimits limits) -> absl::StatusOr<std::unique_ptr<LogitsSource>> {
                 return SourceFor(std::move(logits), limits);
               });
}

ForwardLimits DenoiseSession::EntropyBoundLimits(const EntropyBoundConfig& config, int prompt_len,
                                                 const CanvasRun& run,
                                                 const CachingOptions& caching) {
  const int64_t C = config.canvas_length;
  int64_t positions = prompt_len + C * std::max(1, run.max_canvases);
  if (run.context > 0) {
    // The run starts no canvas past the context: the last whole one that fits.
    positions =
        std::min(positions, prompt_len + C * std::max<int64_t>(1, (run.context - prompt_len) / C));
  }
  // With the cache a step computes the canvas and at most the canvas just
  // joined to the prompt, or on the first step the whole prompt.
  const int64_t rows = caching.cache == CacheMode::kExact
                           ? std::min(positions, std::max<int64_t>(prompt_len + C, 2 * C))
                           : positions;
  return {static_cast<int>(rows), static_cast<int>(positions)};
}

absl::StatusOr<std::unique_ptr<DenoiseSession>> DenoiseSession::Create(
    const SessionModel& model, const EntropyBoundConfig& config, std::vector<int32_t> prompt,
    CanvasRun run, std::unique_ptr<LogitsSource> logits, const CachingOptions& caching) {
  DLLM_RETURN_IF_ERROR(caching.Validate());
  if (caching.cache != CacheMode::kNone && caching.cache != CacheMode::kExact) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache: the entropy-bound denoiser rewrites the whole canvas every step; it takes "
        "cache 'exact' (the prompt encoded once, the default) or 'none', not '",
        CacheModeName(caching.cache), "'"));
  }
  if (caching.cache == CacheMode::kExact && model.mask != MaskKind::kPromptCausal) {
    return absl::InvalidArgumentError(
        "cache: 'exact' needs a model whose prompt rows never read the canvas");
  }
  DLLM_RETURN_IF_ERROR(CheckFixedTokens(model, "prompt", prompt));
  if (prompt.empty()) return absl::InvalidArgumentError("prompt: empty");
  if (run.stop_ids.empty()) run.stop_ids = model.tokens.StopIds();
  if (run.context == 0) run.context = model.n_ctx;
  const int64_t first_end = static_cast<int64_t>(prompt.size()) + config.canvas_length;
  if (first_end > model.n_ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt of ", prompt.size(), " tokens and ", config.canvas_length,
                     " canvas positions exceed the context of ", model.n_ctx));
  }
  const ForwardLimits limits =
      EntropyBoundLimits(config, static_cast<int>(prompt.size()), run, caching);
  const int max_canvases = run.max_canvases;
  DLLM_ASSIGN_OR_RETURN(
      std::unique_ptr<EntropyBoundDenoiser> denoiser,
      EntropyBoundDenoiser::Create(config, prompt, model.n_vocab, std::move(run)));
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<LogitsSource> source, SourceFor(std::move(logits), limits));
  EntropyBoundDenoiser* entropy_bound = denoiser.get();
  auto session = std::unique_ptr<DenoiseSession>(new DenoiseSession(
      model, std::move(denoiser), nullptr, std::move(source), MakeCachePolicy(caching.cache, 0)));
  session->entropy_bound_ = entropy_bound;
  session->logits_.resize(static_cast<size_t>(config.canvas_length) * model.n_vocab);
  if (caching.cache == CacheMode::kExact) {
    session->cache_ = std::make_unique<KvCache>(model.kv_widths, limits.max_positions);
  }
  session->batch_.sequences.reserve(1);
  session->history_.reserve(static_cast<size_t>(config.max_steps) *
                            static_cast<size_t>(max_canvases));
  return session;
}

absl::StatusOr<std::unique_ptr<DenoiseSession>> DenoiseSession::Create(
    std::shared_ptr<const Model> model, const EntropyBoundConfig& config,
    std::vector<int32_t> prompt, CanvasRun run, const CachingOptions& caching) {
  const SessionModel session_model = SessionModel::Of(model->config());
  if (run.context == 0) run.context = session_model.n_ctx;
  const ForwardLimits limits =
      EntropyBoundLimits(config, static_cast<int>(prompt.size()), run, caching);
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<ForwardPass> pass, ForwardPass::Create(model, limits));
  return Create(session_model, config, std::move(prompt), std::move(run),
                ForwardLogits(std::move(pass)), caching);
}

absl::StatusOr<std::unique_ptr<DenoiseSession>> DenoiseSession::Create(
    std::shared_ptr<const Model> model, const EntropyBoundConfig& config,
    std::vector<int32_t> prompt, CanvasRun run, ForwardPass* pass, const CachingOptions& caching) {
  return Create(SessionModel::Of(model->config()), config, std::move(prompt), std::move(run),
                SharedForwardLogits(pass), caching);
}

size_t DenoiseSession::EntropyBoundStateBytes(const ModelConfig& model,
                                              const EntropyBoundConfig& config, int prompt_len,
                                              const CanvasRun& run, const CachingOptions& caching) {
  CanvasRun bounded = run;
  if (bounded.context == 0) bounded.context = model.n_ctx_train;
  const ForwardLimits limits = EntropyBoundLimits(config, prompt_len, bounded, caching);
  const size_t cache =
      caching.cache == CacheMode::kExact ? KvCache::BytesFor(model, limits.max_positions) : 0;
  const size_t logits = 2 * static_cast<size_t>(config.canvas_length) *
                        static_cast<size_t>(model.n_vocab) * sizeof(float);
  return cache + logits;
}

absl::StatusOr<std::unique_ptr<DenoiseSession>> DenoiseSession::Build(
    const SessionModel& model, const SamplerConfig& config, const CachingOptions& caching,
    CanvasInput input,
    const std::function<absl::StatusOr<std::unique_ptr<LogitsSource>>(ForwardLimits)>&
        make_source) {
  DLLM_RETURN_IF_ERROR(caching.Validate());
  const bool block_causal = model.mask == MaskKind::kBlockCausal;
  if (block_causal && (caching.cache == CacheMode::kPrefix || caching.cache == CacheMode::kDual)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache: '", CacheModeName(caching.cache),
                     "' approximates a bidirectional model; a block-causal model's finished "
                     "blocks are cached exactly (exact, its default; none recomputes them)"));
  }
  if (caching.cache == CacheMode::kExact && !block_causal) {
    return absl::InvalidArgumentError(
        "cache: 'exact' is the exact cache of a model whose prompt or finished blocks never "
        "read the canvas after them; a bidirectional masked model's every row reads the whole "
        "canvas (use prefix or dual, which approximate)");
  }
  SamplerConfig effective = config;
  effective.family = model.family;
  effective.shift_logits = model.shift_logits;
  DLLM_RETURN_IF_ERROR(CheckFixedTokens(model, "prompt", input.prompt));
  DLLM_RETURN_IF_ERROR(CheckFixedTokens(model, "suffix", input.suffix));
  // The sampler validates the request before anything is allocated for it.
  DLLM_ASSIGN_OR_RETURN(DenoiseSampler created,
                        DenoiseSampler::Create(effective, model.tokens, input.prompt, model.n_vocab,
                                               model.n_ctx, input.suffix));
  auto sampler = std::make_unique<DenoiseSampler>(std::move(created));
  const int canvas = static_cast<int>(sampler->canvas().size());
  const ForwardLimits limits = Limits(config, canvas);
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<LogitsSource> source, make_source(limits));
  DenoiseSampler* masked = sampler.get();
  auto session = std::unique_ptr<DenoiseSession>(new DenoiseSession(
      model, std::move(sampler), masked, std::move(source),
      MakeCachePolicy(caching.cache, caching.cache_refresh_steps, block_causal)));
  // Logits only for rows that score generated positions (at most one each),
  // not the whole canvas: an infill canvas of 1,024 tokens around a span of
  // 128 would otherwise page in eight times the memory at every request.
  session->logits_.resize(static_cast<size_t>(LogitRows(config)) * model.n_vocab);
  if (caching.cache != CacheMode::kNone) {
    session->cache_ = std::make_unique<KvCache>(model.kv_widths, canvas);
    if (config.cfg_scale > 0) {
      session->uncond_cache_ = std::make_unique<KvCache>(model.kv_widths, canvas);
    }
  }
  session->batch_.sequences.reserve(2);
  // Each position is committed at most once per history, and each entry
  // commits at least one position or is a scheduled step (at most `steps`,
  // or 2 x canvas under threshold).
  const int gen = config.gen_length;
  session->history_.reserve(static_cast<size_t>(gen + std::max(config.steps, 2 * canvas)));
  session->history_positions_.reserve(gen);
  session->history_tokens_.reserve(gen);
  session->last_rows_.reserve(canvas);
  return session;
}

DenoiseSession::DenoiseSession(const SessionModel& model, std::unique_ptr<Denoiser> denoiser,
                               DenoiseSampler* sampler, std::unique_ptr<LogitsSource> source,
                               std::unique_ptr<CachePolicy> cache_policy)
    : model_(model),
      denoiser_(std::move(denoiser)),
      sampler_(sampler),
      source_(std::move(source)),
      cache_policy_(std::move(cache_policy)) {}

CanvasView DenoiseSession::View() const {
  const int block = denoiser_->block(), block_length = denoiser_->block_length();
  // Block-causal blocks count from position 0, the others' from the prompt's end.
  const int origin = model_.mask == MaskKind::kBlockCausal ? 0 : prompt_len();
  return CanvasView{denoiser_->window_end(),       prompt_len(),       block, block_length,
                    origin + block * block_length, model_.shift_logits};
}

absl::Status DenoiseSession::RequireMasked(const char* what) const {
  if (sampler_ != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(what,
                   ": the session's denoiser rewrites the whole canvas every step; only "
                   "masked denoising (LLaDA, Dream) takes it"));
}

absl::StatusOr<StepReport> DenoiseSession::Advance(const LayerCheck* check) {
  return Step(check, nullptr);
}

absl::StatusOr<StepReport> DenoiseSession::AdvanceWith(std::span<const int32_t> positions,
                                                       std::span<const int32_t> tokens,
                                                       const LayerCheck* check) {
  DLLM_RETURN_IF_ERROR(RequireMasked("advance with"));
  if (positions.size() != tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("advance with: ", positions.size(),
                                                   " positions but ", tokens.size(), " tokens"));
  }
  const std::span<const int32_t> canvas = sampler_->canvas();
  for (size_t i = 0; i < positions.size(); ++i) {
    const int32_t p = positions[i], t = tokens[i];
    if (p < prompt_len() || p >= sampler_->gen_end() || canvas[p] != model_.tokens.mask ||
        (i > 0 && p <= positions[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "advance with: canvas position ", p, " is not a masked generated position in order"));
    }
    if (!NotAGivenToken(t, model_.n_vocab, model_.tokens.mask).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("advance with: token ", t, " at position ", p, " cannot be committed"));
    }
  }
  const Forced forced{positions, tokens};
  return Step(check, &forced);
}

absl::StatusOr<DenoiseSession::StepLogits> DenoiseSession::LastStepLogits() const {
  if (!last_op_advanced_) {
    return absl::FailedPreconditionError("step logits: the last operation was not an advance");
  }
  return StepLogits{
      last_rows_, std::span<const float>(logits_.data(),
                                         last_rows_.size() * static_cast<size_t>(model_.n_vocab))};
}

absl::StatusOr<std::span<const SequenceInput>> DenoiseSession::PlanStep(
    const std::atomic<bool>* stop) {
  if (denoiser_->done()) return absl::FailedPreconditionError("generation already finished");
  last_op_advanced_ = false;
  probe_.valid = false;
  plan_ = StepPlan{};
  plan_.valid = true;
  plan_.start = Clock::now();
  plan_.step = denoiser_->Plan();
  batch_.sequences.clear();
  const std::span<const int32_t> rows = plan_.step.logit_rows;
  if (rows.empty()) return std::span<const SequenceInput>();
  plan_.cache = cache_policy_->Plan(View(), rows);
  PlanBatch(plan_.step, plan_.cache.rows, plan_.cache.use_cache, stop);
  return std::span<const SequenceInput>(batch_.sequences);
}

absl::StatusOr<StepReport> DenoiseSession::FinishStep(const ForwardStats& forward,
                                                      double forward_seconds) {
  return Finish(forward, forward_seconds, nullptr);
}

absl::StatusOr<StepReport> DenoiseSession::Step(const LayerCheck* check, const Forced* forced) {
  DLLM_ASSIGN_OR_RETURN(const std::span<const SequenceInput> sequences, PlanStep(nullptr));
  ForwardStats forward;
  if (!sequences.empty()) {
    if (absl::Status status = source_->Run(batch_, check, &forward); !status.ok()) {
      // A failed forward leaves the session as it was.
      plan_.valid = false;
      return status;
    }
  }
  return Finish(forward, SecondsSince(plan_.start), forced);
}

absl::StatusOr<StepReport> DenoiseSession::Finish(const ForwardStats& forward,
                                                  double forward_seconds, const Forced* forced) {
  if (!plan_.valid) {
    return absl::FailedPreconditionError(
        "finish step: no step was planned since the last operation");
  }
  plan_.valid = false;
  StepReport report;
  report.step = denoiser_->step();
  const std::span<const int32_t> rows = plan_.step.logit_rows;
  const size_t n = rows.size() * static_cast<size_t>(model_.n_vocab);
  std::span<const float> logits, uncond;
  if (!rows.empty()) {
    // Only a forward that ran fills the cache.
    cache_policy_->OnForward(View(), plan_.cache);
    report.cache_use = plan_.cache.use;
    report.forward_passes = static_cast<int>(batch_.sequences.size());
    report.rows_computed = batch_.rows();
    report.forward = forward;
    report.forward_seconds = forward_seconds;
    logits = std::span<const float>(logits_.data(), n);
    if (!plan_.step.uncond_canvas.empty()) {
      uncond = std::span<const float>(UncondLogits(rows.size()), n);
    }
  }
  const Clock::time_point sample_start = Clock::now();
  last_rows_.assign(rows.begin(), rows.end());  // Step() plans the next rows over them
  report.block = denoiser_->block();
  // Only LLaDA2.1's editing writes over written positions: keep the canvas
  // before its steps to say what each write replaced (a masked sampler's
  // writes all replace the mask).
  const bool edits = sampler_ != nullptr && sampler_->config().editing_threshold.has_value();
  if (edits) before_.assign(denoiser_->canvas().begin(), denoiser_->canvas().end());
  if (forced == nullptr) {
    const StepCommits commits = denoiser_->Step(logits, uncond);
    positions_.assign(commits.positions.begin(), commits.positions.end());
    tokens_.assign(commits.tokens.begin(), commits.tokens.end());
  } else {
    positions_.assign(forced->positions.begin(), forced->positions.end());
    tokens_.assign(forced->tokens.begin(), forced->tokens.end());
    sampler_->ApplyStep(positions_, tokens_);  // AdvanceWith: masked sessions only
  }
  report.sample_seconds = SecondsSince(sample_start);
  replaced_.clear();
  for (int32_t p : positions_) {
    replaced_.push_back(edits ? before_[static_cast<size_t>(p)] : model_.tokens.mask);
  }
  report.positions = positions_;
  report.tokens = tokens_;
  report.replaced = replaced_;
  report.masked_remaining = masked_remaining();
  forward_passes_ += report.forward_passes;
  Record(/*scheduled=*/true, positions_, tokens_);
  last_op_advanced_ = true;
  report.step_seconds = report.forward_seconds + report.sample_seconds;
  return report;
}

int DenoiseSession::masked_remaining() const {
  // The entropy-bound canvas holds no masks (a renoised token may be the
  // mask id by chance; it is a token like any other there).
  if (entropy_bound_ != nullptr) return 0;
  const std::span<const int32_t> gen = generated();
  return static_cast<int>(std::count(gen.begin(), gen.end(), model_.tokens.mask));
}

void DenoiseSession::Record(bool scheduled, std::span<const int32_t> positions,
                            std::span<const int32_t> tokens) {
  history_.push_back(HistoryEntry{scheduled, static_cast<int>(history_positions_.size()),
                                  static_cast<int>(positions.size())});
  history_positions_.insert(history_positions_.end(), positions.begin(), positions.end());
  history_tokens_.insert(history_tokens_.end(), tokens.begin(), tokens.end());
}

const float* DenoiseSession::UncondLogits(size_t n_rows) const {
  return logits_.data() + n_rows * static_cast<size_t>(model_.n_vocab);
}

void DenoiseSession::PlanBatch(const DenoiserPlan& plan, RowRange range, bool use_cache,
                               const std::atomic<bool>* stop) {
  const std::span<const int32_t> rows = plan.logit_rows;
  const size_t n_vocab = static_cast<size_t>(model_.n_vocab);
  DLLM_CHECK(rows.size() * (plan.uncond_canvas.empty() ? 1 : 2) * n_vocab <= logits_.size());
  batch_.sequences.clear();
  SequenceInput& in = batch_.sequences.emplace_back(
      SequenceInput{plan.canvas, range.begin, range.end, rows, use_cache ? cache_.get() : nullptr,
                    logits_.data(), stop});
  const AttentionMask mask{model_.mask,
                           model_.mask == MaskKind::kBlockCausal ? denoiser_->block_length() : 0,
                           model_.mask == MaskKind::kPromptCausal ? prompt_len() : 0};
  in.mask = mask;
  in.self_conditioning = plan.self_conditioning;
  in.self_conditioning_temp_inv = plan.self_conditioning_temp_inv;
  if (!plan.uncond_canvas.empty()) {
    batch_.sequences.push_back(SequenceInput{plan.uncond_canvas, range.begin, range.end, rows,
                                             use_cache ? uncond_cache_.get() : nullptr,
                                             logits_.data() + rows.size() * n_vocab, stop});
    batch_.sequences.back().mask = mask;
  }
}

std::span<const float> DenoiseSession::RowAt(int p, std::span<const int32_t> rows,
                                             const float* logits, const float* uncond,
                                             std::span<float> cfg_row) const {
  const size_t v = static_cast<size_t>(model_.n_vocab);
  const auto it = std::lower_bound(rows.begin(), rows.end(), sampler_->LogitRowOf(p));
  DLLM_CHECK(it != rows.end() && *it == sampler_->LogitRowOf(p));
  const size_t r = static_cast<size_t>(it - rows.begin());
  std::span<const float> row(logits + r * v, v);
  if (uncond == nullptr) return row;
  CombineCfg(row, std::span<const float>(uncond + r * v, v), sampler_->config().cfg_scale, cfg_row);
  return cfg_row;
}

void DenoiseSession::CandidatesAt(int p, int k, std::span<const int32_t> rows, const float* logits,
                                  const float* uncond, std::span<float> cfg_row,
                                  PositionCandidates* out) const {
  const std::span<const float> row = RowAt(p, rows, logits, uncond, cfg_row);
  out->position = p - prompt_len();
  out->top.resize(static_cast<size_t>(k));
  out->top.resize(static_cast<size_t>(TopCandidates(row, k, out->top)));
}

template <typename Fn>
absl::Status DenoiseSession::ForEachStepRow(const char* what, Fn fn) const {
  if (!last_op_advanced_) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the last operation was not a successful advance"));
  }
  DLLM_RETURN_IF_ERROR(RequireMasked(what));
  const bool cfg = sampler_->config().cfg_scale > 0;
  tbb::parallel_for(size_t{0}, positions_.size(), [&](size_t i) {
    std::vector<float> cfg_row(cfg ? static_cast<size_t>(model_.n_vocab) : 0);
    fn(i, cfg_row);
  });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PositionCandidates>> DenoiseSession::StepCandidates(int k) const {
  DLLM_RETURN_IF_ERROR(CheckTopK(k));
  DLLM_RETURN_IF_ERROR(RequireMasked("step candidates"));
  const bool cfg = sampler_->config().cfg_scale > 0;
  std::vector<PositionCandidates> out(positions_.size());
  DLLM_RETURN_IF_ERROR(ForEachStepRow("step candidates", [&](size_t i, std::span<float> cfg_row) {
    CandidatesAt(positions_[i], k, last_rows_, logits_.data(),
                 cfg ? UncondLogits(last_rows_.size()) : nullptr, cfg_row, &out[i]);
  }));
  return out;
}

absl::StatusOr<std::vector<double>> DenoiseSession::StepLogProbs() const {
  DLLM_RETURN_IF_ERROR(RequireMasked("step log-probabilities"));
  const bool cfg = sampler_->config().cfg_scale > 0;
  std::vector<double> out(positions_.size());
  DLLM_RETURN_IF_ERROR(
      ForEachStepRow("step log-probabilities", [&](size_t i, std::span<float> cfg_row) {
        const std::span<const float> row =
            RowAt(positions_[i], last_rows_, logits_.data(),
                  cfg ? UncondLogits(last_rows_.size()) : nullptr, cfg_row);
        out[i] = TokenLogProb(row, tokens_[i]);
      }));
  return out;
}

absl::StatusOr<ForwardReport> DenoiseSession::Forward(std::span<const int32_t> positions, int k,
                                                      const LayerCheck* check) {
  DLLM_ASSIGN_OR_RETURN(const std::span<const SequenceInput> sequences, PlanForward(positions, k));
  const Clock::time_point start = Clock::now();
  if (!sequences.empty()) {
    if (absl::Status status = source_->Run(batch_, check, nullptr); !status.ok()) {
      probe_.valid = false;
      return status;
    }
  }
  return FinishForward(SecondsSince(start));
}

absl::StatusOr<std::span<const SequenceInput>> DenoiseSession::PlanForward(
    std::span<const int32_t> positions, int k) {
  DLLM_RETURN_IF_ERROR(CheckTopK(k));
  DLLM_RETURN_IF_ERROR(RequireMasked("forward"));
  const int gen = gen_length();
  const int prompt_len = this->prompt_len();
  // Canvas positions, in the order asked for.
  std::vector<int32_t>& wanted = probe_.positions;
  wanted.clear();
  if (positions.empty()) {
    const int32_t mask = model_.tokens.mask;
    for (int p = prompt_len; p < prompt_len + gen; ++p) {
      if (canvas()[p] == mask) wanted.push_back(p);
    }
  } else {
    std::vector<bool> seen(static_cast<size_t>(gen), false);
    for (int32_t p : positions) {
      if (p < 0 || p >= gen) {
        return absl::InvalidArgumentError(absl::StrCat(
            "forward: position ", p, " is outside the generated region [0, ", gen, ")"));
      }
      if (seen[p]) {
        return absl::InvalidArgumentError(
            absl::StrCat("forward: position ", p, " is asked for twice"));
      }
      seen[p] = true;
      wanted.push_back(prompt_len + p);
    }
  }
  probe_.valid = true;
  probe_.k = k;
  if (wanted.empty()) return std::span<const SequenceInput>();
  // The logits buffer is about to be overwritten.
  last_op_advanced_ = false;
  plan_.valid = false;

  forward_rows_.clear();
  for (int32_t p : wanted) forward_rows_.push_back(sampler_->LogitRowOf(p));
  std::sort(forward_rows_.begin(), forward_rows_.end());
  forward_rows_.erase(std::unique(forward_rows_.begin(), forward_rows_.end()), forward_rows_.end());
  DenoiserPlan probe;
  probe.canvas = canvas();
  probe.logit_rows = forward_rows_;
  if (sampler_->config().cfg_scale > 0) probe.uncond_canvas = sampler_->unconditional_canvas();
  PlanBatch(probe, RowRange{0, static_cast<int32_t>(canvas().size())}, /*use_cache=*/false,
            nullptr);
  return std::span<const SequenceInput>(batch_.sequences);
}

absl::StatusOr<ForwardReport> DenoiseSession::FinishForward(double forward_seconds) {
  if (!probe_.valid) {
    return absl::FailedPreconditionError(
        "finish forward: no forward was planned since the last operation");
  }
  probe_.valid = false;
  ForwardReport report;
  const std::vector<int32_t>& wanted = probe_.positions;
  if (wanted.empty()) return report;
  report.forward_passes = static_cast<int>(batch_.sequences.size());
  forward_passes_ += report.forward_passes;
  report.forward_seconds = forward_seconds;
  const bool cfg = sampler_->config().cfg_scale > 0;
  report.candidates.resize(wanted.size());
  tbb::parallel_for(size_t{0}, wanted.size(), [&](size_t i) {
    std::vector<float> cfg_row(cfg ? static_cast<size_t>(model_.n_vocab) : 0);
    CandidatesAt(wanted[i], probe_.k, forward_rows_, logits_.data(),
                 cfg ? UncondLogits(forward_rows_.size()) : nullptr, cfg_row,
                 &report.candidates[i]);
  });
  return report;
}

absl::Status DenoiseSession::Commit(std::span<const int32_t> positions,
                                    std::span<const int32_t> tokens) {
  DLLM_RETURN_IF_ERROR(RequireMasked("commit"));
  if (sampler_->done()) return absl::FailedPreconditionError("commit: generation already finished");
  if (positions.empty()) return absl::InvalidArgumentError("commit: no tokens");
  if (positions.size() != tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("commit: ", positions.size(), " positions but ", tokens.size(), " tokens"));
  }
  const int gen = gen_length();
  const int prompt_len = sampler_->prompt_len();
  const int n_vocab = model_.n_vocab;
  const int32_t mask = model_.tokens.mask;
  std::vector<bool> seen(static_cast<size_t>(gen), false);
  for (size_t i = 0; i < positions.size(); ++i) {
    const int32_t p = positions[i], t = tokens[i];
    if (p < 0 || p >= gen) {
      return absl::InvalidArgumentError(
          absl::StrCat("commit: position ", p, " is outside the generated region [0, ", gen, ")"));
    }
    if (seen[p]) {
      return absl::InvalidArgumentError(absl::StrCat("commit: position ", p, " appears twice"));
    }
    seen[p] = true;
    if (std::string why = NotAGivenToken(t, n_vocab, mask); !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("commit: token ", t, " at position ", p, " ", why));
    }
  }
  for (int32_t p : positions) {
    const int32_t current = sampler_->canvas()[prompt_len + p];
    if (current != mask) {
      return absl::FailedPreconditionError(absl::StrCat(
          "commit: position ", p, " is not masked (token ", current, " is committed there)"));
    }
  }
  // Ascending, like a step's commits.
  std::vector<size_t> order(positions.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return positions[a] < positions[b]; });
  std::vector<int32_t> canvas_positions, sorted_tokens;
  for (size_t i : order) {
    canvas_positions.push_back(prompt_len + positions[i]);
    sorted_tokens.push_back(tokens[i]);
  }
  last_op_advanced_ = false;
  plan_.valid = false;
  probe_.valid = false;
  cache_policy_->OnCommit(View(), canvas_positions);
  sampler_->Commit(canvas_positions, sorted_tokens);
  Record(/*scheduled=*/false, canvas_positions, sorted_tokens);
  return absl::OkStatus();
}

absl::Status DenoiseSession::Rewind(int to_step) {
  DLLM_RETURN_IF_ERROR(RequireMasked("rewind"));
  if (to_step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("rewind: step ", to_step, " is negative"));
  }
  if (to_step > history_size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rewind: step ", to_step, " is beyond the history of ", history_size(), " steps"));
  }
  last_op_advanced_ = false;
  plan_.valid = false;
  probe_.valid = false;
  cache_policy_->OnRewind();
  sampler_->Restart();
  for (int i = 0; i < to_step; ++i) {
    const HistoryEntry& e = history_[i];
    const std::span<const int32_t> positions(history_positions_.data() + e.offset, e.count);
    const std::span<const int32_t> tokens(history_tokens_.data() + e.offset, e.count);
    if (e.scheduled) {
      sampler_->ApplyStep(positions, tokens);
    } else {
      sampler_->Commit(positions, tokens);
    }
  }
  const size_t kept =
      to_step == 0
          ? 0
          : static_cast<size_t>(history_[to_step - 1].offset + history_[to_step - 1].count);
  history_.resize(static_cast<size_t>(to_step));
  history_positions_.resize(kept);
  history_tokens_.resize(kept);
  return absl::OkStatus();
}

std::span<const int32_t> DenoiseSession::OutputTokens() const { return denoiser_->Output(); }

std::span<const int32_t> DenoiseSession::StableTokens() const {
  if (entropy_bound_ != nullptr) return entropy_bound_->response();
  return sampler_->Stable();
}

std::span<const int32_t> DenoiseSession::stop_ids() const {
  return entropy_bound_ != nullptr ? std::span<const int32_t>(entropy_bound_->run().stop_ids)
                                   : sampler_->stop_ids();
}

bool DenoiseSession::exited_early() const {
  return sampler_ != nullptr && sampler_->exited_early();
}

}  // namespace dllm
