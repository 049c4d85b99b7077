#include "service/server/generate_job.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "service/server/metrics_hooks.h"

namespace dllm {
namespace {

double SecondsSince(EngineClock::time_point t) {
  return std::chrono::duration<double>(EngineClock::now() - t).count();
}

// A token's own text for `CommittedToken.piece`; a partial UTF-8 sequence
// shows as U+FFFD.
std::string Piece(const BpeTokenizer& tok, int32_t id) {
  return SanitizeUtf8(tok.TokenPiece(id));
}

FinishKind FinishKindOf(const absl::Status& status, bool eos) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return eos ? FinishKind::kEos : FinishKind::kLength;
    case absl::StatusCode::kCancelled:
      return FinishKind::kCancelled;
    case absl::StatusCode::kDeadlineExceeded:
      return FinishKind::kDeadline;
    default:
      return FinishKind::kError;
  }
}

}  // namespace

GenerateJob::GenerateJob(std::shared_ptr<const Model> model, GenerationSpec spec,
                         std::shared_ptr<GenerateMailbox> mailbox, ServiceMetrics* metrics)
    : model_(std::move(model)),
      spec_(std::move(spec)),
      mailbox_(std::move(mailbox)),
      metrics_(metrics),
      decoder_(&model_->tokenizer(), /*render_special=*/false) {}

GenerateJob::~GenerateJob() = default;

int GenerateJob::planned_steps() const {
  return spec_.sampler.threshold ? 0 : spec_.sampler.steps;
}

absl::Status GenerateJob::Begin() {
  first_run_ = EngineClock::now();
  absl::StatusOr<std::unique_ptr<DenoiseSession>> session =
      DenoiseSession::Create(model_, spec_.sampler, spec_.prompt);
  if (!session.ok()) return session.status();
  session_ = std::move(*session);
  const int prompt_len = static_cast<int>(spec_.prompt.size());
  DLLM_METRICS_CALL(metrics_, OnStarted(queue_seconds(), prompt_len,
                                        prompt_len + spec_.sampler.gen_length));
  v1::Started started;
  started.set_prompt_tokens(prompt_len);
  started.set_gen_length(spec_.sampler.gen_length);
  started.set_block_length(spec_.sampler.EffectiveBlockLength());
  started.set_planned_steps(planned_steps());
  started.set_mask_token_id(model_->config().tokens.mask);
  started.set_queue_seconds(queue_seconds());
  started.set_seed(spec_.sampler.seed);
  started.set_algorithm(AlgorithmToProto(spec_.sampler.algorithm));
  mailbox_->SetProgress(0, planned_steps(), spec_.sampler.gen_length);
  mailbox_->PostStarted(started);
  return absl::OkStatus();
}

absl::StatusOr<bool> GenerateJob::RunStep(const std::atomic<bool>* cancel) {
  if (session_ == nullptr) {
    if (absl::Status s = Begin(); !s.ok()) return s;
  }
  absl::StatusOr<StepReport> report = session_->Advance(cancel);
  if (!report.ok()) return report.status();
  ++steps_;
  step_seconds_total_ += report->step_seconds;
  DLLM_METRICS_CALL(metrics_, OnStep(report->forward, report->step_seconds,
                                     report->forward_seconds, report->sample_seconds,
                                     report->forward_passes,
                                     static_cast<int>(report->positions.size())));
  if (steps_ == 1) {
    first_step_seconds_ = SecondsSince(arrival());
    DLLM_METRICS_CALL(metrics_, OnFirstStep(first_step_seconds_));
  }
  const bool done = session_->done();
  const v1::Detail detail = spec_.stream.detail;
  const BpeTokenizer& tok = model_->tokenizer();
  const int prompt_len = session_->prompt_len();
  const int gen_length = spec_.sampler.gen_length;
  const std::span<const int32_t> canvas = session_->canvas();
  const int32_t mask = model_->config().tokens.mask;
  const std::span<const int32_t> stops = session_->sampler().stop_ids();

  // The stable prefix and its text.
  const int stable_before = stable_;
  std::string delta;
  while (stable_ < gen_length && canvas[prompt_len + stable_] != mask) {
    const int32_t id = canvas[prompt_len + stable_];
    ++stable_;
    if (text_ended_) continue;
    if (std::find(stops.begin(), stops.end(), id) != stops.end()) {
      text_ended_ = true;
      continue;
    }
    absl::StatusOr<std::string> piece = decoder_.Push(id);
    if (piece.ok()) delta += *piece;
  }
  if (done) delta += decoder_.Finish();
  if (!delta.empty() && first_token_seconds_ == 0) {
    first_token_seconds_ = SecondsSince(arrival());
    DLLM_METRICS_CALL(metrics_, OnFirstToken(first_token_seconds_));
  }
  text_ += delta;
  mailbox_->SetProgress(steps_, planned_steps(), report->masked_remaining);

  // This step's part of the next StepEvent.
  v1::StepEvent step;
  step.set_step(steps_);
  step.set_planned_steps(planned_steps());
  step.set_block_index(report->step / std::max(1, spec_.sampler.StepsPerBlock()));
  if (spec_.sampler.threshold) {
    // Threshold decoding has no step schedule: the block is where the last commit landed.
    const int block = spec_.sampler.EffectiveBlockLength();
    step.set_block_index(report->positions.empty()
                             ? 0
                             : (report->positions.back() - prompt_len) / std::max(1, block));
  }
  step.set_masked_remaining(report->masked_remaining);
  step.set_stable_length(stable_);
  step.set_text_delta(delta);
  step.set_merged_steps(1);
  if (detail >= v1::DETAIL_STEPS) {
    for (size_t i = 0; i < report->positions.size(); ++i) {
      v1::CommittedToken* t = step.add_committed();
      t->set_position(report->positions[i] - prompt_len);
      t->set_token_id(report->tokens[i]);
      t->set_piece(Piece(tok, report->tokens[i]));
    }
  }
  if (spec_.stream.top_candidates > 0 && !report->positions.empty()) {
    absl::StatusOr<std::vector<PositionCandidates>> candidates =
        session_->StepCandidates(spec_.stream.top_candidates);
    if (!candidates.ok()) return candidates.status();
    for (const PositionCandidates& pc : *candidates) {
      v1::PositionCandidates* out = step.add_candidates();
      out->set_position(pc.position);
      for (const TokenProb& tp : pc.top) {
        v1::Candidate* c = out->add_candidates();
        c->set_token_id(tp.token);
        c->set_prob(tp.prob);
        c->set_piece(Piece(tok, tp.token));
      }
    }
  }
  if (spec_.stream.include_timings) {
    v1::StepTimings* t = step.mutable_timings();
    t->set_step_seconds(report->step_seconds);
    t->set_forward_seconds(report->forward_seconds);
    t->set_sample_seconds(report->sample_seconds);
    auto& ops = *t->mutable_op_seconds();
    ops["attention"] = report->forward.attention;
    ops["projections"] = report->forward.projections;
    ops["ffn"] = report->forward.ffn;
    ops["head"] = report->forward.head;
    ops["norm_embed"] = report->forward.norm + report->forward.embed;
  }
  if (detail == v1::DETAIL_FINAL_ONLY) return !done;
  if (pending_steps_ == 0) {
    pending_ = std::move(step);
  } else {
    MergeStepEvents(std::move(step), &pending_);
  }
  ++pending_steps_;

  bool emit = false;
  switch (detail) {
    case v1::DETAIL_FINAL_ONLY:
      break;
    case v1::DETAIL_TEXT:
      emit = stable_ > stable_before || (done && !pending_.text_delta().empty());
      break;
    default:  // DETAIL_STEPS, DETAIL_CANVAS
      emit = steps_ % spec_.stream.step_stride == 0 || done;
      break;
  }
  if (emit) {
    if (detail == v1::DETAIL_CANVAS) {
      for (int p = 0; p < gen_length; ++p) pending_.add_canvas(canvas[prompt_len + p]);
    }
    mailbox_->PostStep(std::move(pending_));
    pending_.Clear();
    pending_steps_ = 0;
  }
  return !done;
}

v1::Final GenerateJob::BuildFinal() const {
  v1::Final f;
  const std::span<const int32_t> output = session_->OutputTokens();
  const bool eos = static_cast<int>(output.size()) < spec_.sampler.gen_length;
  f.set_finish_reason(eos ? v1::FINISH_REASON_EOS : v1::FINISH_REASON_LENGTH);
  for (int32_t id : output) f.add_token_ids(id);
  f.set_text(text_);
  const int prompt_len = static_cast<int>(spec_.prompt.size());
  v1::Usage* u = f.mutable_usage();
  u->set_prompt_tokens(prompt_len);
  u->set_generated_tokens(static_cast<uint32_t>(output.size()));
  u->set_canvas_tokens(prompt_len + spec_.sampler.gen_length);
  u->set_steps(session_->sampler().step());
  u->set_forward_passes(session_->forward_passes());
  v1::Timings* t = f.mutable_timings();
  const double total = SecondsSince(arrival());
  const double generating = SecondsSince(first_run_);
  t->set_queue_seconds(queue_seconds());
  t->set_time_to_first_step_seconds(first_step_seconds_);
  t->set_time_to_first_token_seconds(first_token_seconds_);
  t->set_total_seconds(total);
  t->set_mean_step_seconds(steps_ > 0 ? step_seconds_total_ / steps_ : 0);
  t->set_tokens_per_second(generating > 0 ? output.size() / generating : 0);
  f.set_seed(spec_.sampler.seed);
  f.set_exited_early(session_->exited_early());
  return f;
}

void GenerateJob::Finish(const absl::Status& status) {
  const double total = SecondsSince(arrival());
  bool eos = false;
  int generated = 0;
  if (status.ok() && session_ != nullptr) {
    const v1::Final final = BuildFinal();
    eos = final.finish_reason() == v1::FINISH_REASON_EOS;
    generated = static_cast<int>(final.token_ids_size());
    mailbox_->PostFinal(final);
  } else {
    mailbox_->Fail(status.ok() ? absl::InternalError("generation ended without a result") : status);
  }
  const FinishKind kind = FinishKindOf(status, eos);
  DLLM_METRICS_CALL(metrics_, OnFinished(RpcKind::kGenerate, kind,
                                         absl::StatusCodeToString(status.code()), total, steps_,
                                         generated));
  const std::string reason = status.ok() ? (eos ? "eos" : "length")
                                         : absl::StatusCodeToString(status.code());
  const std::string why = status.ok() ? "" : absl::StrFormat(" (%s)", status.message());
  std::fprintf(stderr, "dllm-server: request %s: %d steps, %.1f ms, finish %s%s\n",
               spec_.request_id.c_str(), steps_, total * 1e3, reason.c_str(), why.c_str());
  // The session's ForwardPass belongs to the arena: release it here, inside it.
  session_.reset();
}

}  // namespace dllm
