#include "service/engine/generate_job.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

absl::StatusOr<std::unique_ptr<DenoiseSession>> CreateSession(std::shared_ptr<const Model> model,
                                                              const GenerationSpec& spec,
                                                              ForwardPass* pass) {
  if (spec.entropy_bound) {
    return DenoiseSession::Create(std::move(model), spec.entropy_bound->config, spec.prompt,
                                  spec.entropy_bound->run, pass, spec.caching);
  }
  return DenoiseSession::Create(std::move(model), spec.sampler,
                                CanvasInput(spec.prompt, spec.suffix), pass, spec.caching);
}

EngineWorker::Reservation ReservationFor(const ModelConfig& model, const GenerationSpec& spec) {
  if (!spec.entropy_bound) {
    return EngineWorker::ReservationFor(model, spec.sampler, spec.caching, spec.canvas_tokens());
  }
  const EntropyBoundRequest& eb = *spec.entropy_bound;
  const int prompt = static_cast<int>(spec.prompt.size());
  return {DenoiseSession::EntropyBoundStateBytes(model, eb.config, prompt, eb.run, spec.caching),
          DenoiseSession::EntropyBoundLimits(eb.config, prompt, eb.run, spec.caching).max_rows};
}

GenerateJob::GenerateJob(std::shared_ptr<const Model> model, GenerationSpec spec,
                         std::shared_ptr<GenerateMailbox> mailbox, ServiceMetrics* metrics)
    : model_(std::move(model)),
      spec_(std::move(spec)),
      mailbox_(std::move(mailbox)),
      metrics_(ServiceMetrics::OrNoOp(metrics)),
      text_(&model_->tokenizer()) {}

GenerateJob::~GenerateJob() = default;

int GenerateJob::planned_steps() const { return spec_.planned_steps(); }

absl::Status GenerateJob::Begin(ForwardPass* pass) {
  first_run_ = EngineClock::now();
  absl::StatusOr<std::unique_ptr<DenoiseSession>> session = CreateSession(model_, spec_, pass);
  if (!session.ok()) return session.status();
  session_ = std::move(*session);
  metrics_->OnStarted(queue_seconds(), static_cast<int>(spec_.prompt.size()),
                      spec_.canvas_tokens());
  mailbox_->SetProgress(0, planned_steps(), spec_.sampler.gen_length);
  mailbox_->PostStarted(MakeStarted(spec_, *model_, queue_seconds()));
  return absl::OkStatus();
}

absl::StatusOr<std::span<const SequenceInput>> GenerateJob::Plan(ForwardPass* pass) {
  if (session_ == nullptr) {
    if (absl::Status s = Begin(pass); !s.ok()) return s;
  }
  return session_->PlanStep(stop_flag());
}

absl::StatusOr<bool> GenerateJob::Complete(const ForwardStats& forward, double forward_seconds) {
  absl::StatusOr<StepReport> report = session_->FinishStep(forward, forward_seconds);
  if (!report.ok()) return report.status();
  return AfterStep(*report);
}

absl::Status GenerateJob::AddScoresAndTimings(const StepReport& report, v1::StepEvent* step) {
  if (spec_.stream.detail >= v1::DETAIL_STEPS) {
    if (spec_.stream.include_logprobs && !report.positions.empty()) {
      absl::StatusOr<std::vector<double>> logprobs = session_->StepLogProbs();
      if (!logprobs.ok()) return logprobs.status();
      for (size_t i = 0; i < logprobs->size(); ++i) {
        step->mutable_committed(static_cast<int>(i))
            ->set_logprob(static_cast<float>((*logprobs)[i]));
      }
    }
  }
  if (spec_.stream.top_candidates > 0 && !report.positions.empty()) {
    absl::StatusOr<std::vector<PositionCandidates>> candidates =
        session_->StepCandidates(spec_.stream.top_candidates);
    if (!candidates.ok()) return candidates.status();
    AddCandidates(model_->tokenizer(), *candidates, step->mutable_candidates());
  }
  if (spec_.stream.include_timings) {
    v1::StepTimings* t = step->mutable_timings();
    t->set_step_seconds(report.step_seconds);
    t->set_forward_seconds(report.forward_seconds);
    t->set_sample_seconds(report.sample_seconds);
    auto& ops = *t->mutable_op_seconds();
    for (const ForwardOp& op : kForwardOps) ops[op.name] = report.forward.*op.seconds;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> GenerateJob::AfterStep(const StepReport& report) {
  ++steps_;
  step_seconds_total_ += report.step_seconds;
  metrics_->OnStep(report);
  if (steps_ == 1) {
    first_step_seconds_ = SecondsSince(arrival());
    metrics_->OnFirstStep(first_step_seconds_);
  }
  const bool done = session_->done();
  const v1::Detail detail = spec_.stream.detail;
  const BpeTokenizer& tok = model_->tokenizer();

  const int stable_before = text_.stable_length();
  const std::string delta = text_.Update(*session_, spec_.sampler.gen_length, done);
  if (!delta.empty() && first_token_seconds_ == 0) {
    first_token_seconds_ = SecondsSince(arrival());
    metrics_->OnFirstToken(first_token_seconds_);
  }
  mailbox_->SetProgress(steps_, planned_steps(), report.masked_remaining);

  // This step's part of the next StepEvent.
  v1::StepEvent step;
  step.set_step(steps_);
  step.set_planned_steps(planned_steps());
  AddStepReport(tok, spec_, *session_, report, detail >= v1::DETAIL_STEPS,
                detail == v1::DETAIL_CANVAS, &step);
  step.set_masked_remaining(report.masked_remaining);
  step.set_stable_length(text_.stable_length());
  step.set_text_delta(delta);
  step.set_merged_steps(1);
  step.set_final_follows(done);
  if (absl::Status s = AddScoresAndTimings(report, &step); !s.ok()) return s;
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
      emit = text_.stable_length() > stable_before || (done && !pending_.text_delta().empty());
      break;
    default:  // DETAIL_STEPS, DETAIL_CANVAS
      emit = steps_ % spec_.stream.step_stride == 0 || done;
      break;
  }
  if (emit) {
    if (detail == v1::DETAIL_CANVAS) AddCanvas(*session_, &pending_);
    mailbox_->PostStep(std::move(pending_));
    pending_.Clear();
    pending_steps_ = 0;
  }
  return !done;
}

v1::Final GenerateJob::BuildFinal() const {
  v1::Final f = MakeFinal(*session_, spec_, text_.text());
  const size_t generated = static_cast<size_t>(f.token_ids_size());
  v1::Timings* t = f.mutable_timings();
  const double total = SecondsSince(arrival());
  const double generating = SecondsSince(first_run_);
  t->set_queue_seconds(queue_seconds());
  t->set_time_to_first_step_seconds(first_step_seconds_);
  t->set_time_to_first_token_seconds(first_token_seconds_);
  t->set_total_seconds(total);
  t->set_mean_step_seconds(steps_ > 0 ? step_seconds_total_ / steps_ : 0);
  t->set_tokens_per_second(generating > 0 ? generated / generating : 0);
  return f;
}

void GenerateJob::Finish(const absl::Status& status) {
  const double total = SecondsSince(arrival());
  bool eos = false;
  int generated = 0;
  if (status.ok() && session_ != nullptr) {
    final_ = BuildFinal();
    eos = final_->finish_reason() == v1::FINISH_REASON_EOS;
    generated = static_cast<int>(final_->token_ids_size());
  } else {
    end_ = status.ok() ? absl::InternalError("generation ended without a result") : status;
  }
  const FinishKind kind = FinishKindOf(status, eos);
  metrics_->OnFinished(rpc(), kind, status.code(), total, steps_, generated);
  const std::string reason =
      status.ok() ? (eos ? "eos" : "length") : absl::StatusCodeToString(status.code());
  std::string why = status.ok() ? "" : absl::StrFormat(" (%s)", status.message());
  if (stop_latency_seconds() >= 0) {
    // scripts/bench-cancel reads this figure.
    why += absl::StrFormat(", stopped %.3f ms after it", stop_latency_seconds() * 1e3);
  }
  std::fprintf(stderr, "dllm-server: request %s: %d steps, %.1f ms, finish %s%s\n",
               spec_.request_id.c_str(), steps_, total * 1e3, reason.c_str(), why.c_str());
  // The session's K/V caches and logits are what admission reserved for
  // this request: free them as it finishes, not when the job object goes.
  session_.reset();
}

void GenerateJob::Deliver() {
  if (final_.has_value()) {
    mailbox_->PostFinal(*final_);
  } else {
    mailbox_->Fail(end_);
  }
}

}  // namespace dllm
