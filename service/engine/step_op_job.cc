#include "service/engine/step_op_job.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/engine/generate_job.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

absl::StatusOr<std::span<const SequenceInput>> StepOpJob::Plan(ForwardPass* pass) {
  pass_ = pass;
  planned_ = absl::OkStatus();
  if (request_.op_case() == v1::StepRequest::kOpen || state_->session == nullptr) return kNoForward;
  absl::StatusOr<std::span<const SequenceInput>> sequences;
  switch (request_.op_case()) {
    case v1::StepRequest::kAdvance:
      if (remaining_ < 0) {
        planned_ = CheckAdvance();
        if (!planned_.ok()) return kNoForward;
        StartAdvance();
      }
      sequences = state_->session->PlanStep(stop_flag());
      break;
    case v1::StepRequest::kForward:
      sequences = PlanForward();
      break;
    default:
      return kNoForward;
  }
  // An op-level failure is told in-band when the unit completes.
  if (!sequences.ok()) {
    planned_ = sequences.status();
    return kNoForward;
  }
  return *sequences;
}

absl::StatusOr<bool> StepOpJob::Complete(const ForwardStats& forward, double forward_seconds) {
  if (request_.op_case() == v1::StepRequest::kOpen) return RunOpen(pass_);
  if (state_->session == nullptr) {
    Error(absl::FailedPreconditionError("no session is open: send Open first"));
    return false;
  }
  if (!planned_.ok()) {
    Error(planned_);
    return false;
  }
  switch (request_.op_case()) {
    case v1::StepRequest::kAdvance: {
      absl::StatusOr<StepReport> report = state_->session->FinishStep(forward, forward_seconds);
      if (!report.ok()) {
        Error(report.status());
        return false;
      }
      return AfterAdvance(*report);
    }
    case v1::StepRequest::kForward:
      FinishForward(forward_seconds);
      return false;
    case v1::StepRequest::kCommit:
      RunCommit();
      return false;
    case v1::StepRequest::kRewind:
      RunRewind();
      return false;
    default:
      Error(absl::InvalidArgumentError("op: not an engine operation"));
      return false;
  }
}

void StepOpJob::Deliver() {
  if (status_.ok()) {
    state_->outbox->EndOp();
  } else {
    state_->outbox->Fail(status_);
  }
}

bool StepOpJob::RunOpen(ForwardPass* pass) {
  StepSessionState& s = *state_;
  absl::StatusOr<std::unique_ptr<DenoiseSession>> session = CreateSession(s.model, s.spec, pass);
  if (!session.ok()) {
    s.lease.reset();
    Error(session.status());
    return false;
  }
  s.session = std::move(*session);
  s.text.Reset();
  s.open = true;
  s.metrics->OnStarted(queue_seconds(), static_cast<int>(s.spec.prompt.size()),
                       s.spec.canvas_tokens());
  v1::StepResponse r;
  r.mutable_opened()->set_session_id(s.session_id);
  *r.mutable_opened()->mutable_started() = MakeStarted(s.spec, *s.model, queue_seconds());
  Respond(std::move(r));
  return false;
}

v1::StepEvent StepOpJob::StepEventNow(bool done) {
  StepSessionState& s = *state_;
  v1::StepEvent e;
  e.set_step(s.session->history_size());
  e.set_planned_steps(s.spec.planned_steps());
  e.set_masked_remaining(s.session->masked_remaining());
  e.set_text_delta(s.text.Update(*s.session, s.spec.sampler.gen_length, done));
  e.set_stable_length(s.text.stable_length());
  e.set_merged_steps(1);
  e.set_final_follows(done);
  return e;
}

bool StepOpJob::MaybeFinal() {
  StepSessionState& s = *state_;
  if (!s.session->done()) return false;
  v1::StepResponse r;
  *r.mutable_final() = MakeFinal(*s.session, s.spec, s.text.text());
  s.generated = r.final().token_ids_size();
  s.eos = r.final().finish_reason() == v1::FINISH_REASON_EOS;
  s.completed = true;
  Respond(std::move(r));
  return true;
}

absl::Status StepOpJob::CheckAdvance() const {
  const v1::Advance& op = request_.advance();
  if (state_->session->done()) {
    return absl::FailedPreconditionError(
        "the canvas is complete (Final was sent): Rewind to go on, or Close");
  }
  if (op.top_candidates() > static_cast<uint32_t>(kMaxTopCandidates)) {
    return absl::InvalidArgumentError(absl::StrCat("advance.top_candidates: ", op.top_candidates(),
                                                   " is more than ", kMaxTopCandidates));
  }
  return absl::OkStatus();
}

void StepOpJob::StartAdvance() {
  // The count is kept in a type that holds every uint32 (an int wrapped
  // at 2^31 and ended the op without its Final); the loop ends at the
  // canvas' completion however many steps were asked for.
  remaining_ = std::max<int64_t>(1, request_.advance().steps());
}

bool StepOpJob::AfterAdvance(const StepReport& report) {
  StepSessionState& s = *state_;
  const v1::Advance& op = request_.advance();
  ++s.steps;
  s.metrics->OnStep(report);
  const bool done = s.session->done();
  const BpeTokenizer& tok = s.model->tokenizer();
  v1::StepResponse r;
  v1::StepEvent* e = r.mutable_step();
  *e = StepEventNow(done);
  AddStepReport(tok, s.spec, *s.session, report, /*with_tokens=*/true, op.include_canvas(), e);
  if (op.include_canvas()) AddCanvas(*s.session, e);
  if (op.top_candidates() > 0 && !report.positions.empty()) {
    absl::StatusOr<std::vector<PositionCandidates>> candidates =
        s.session->StepCandidates(static_cast<int>(op.top_candidates()));
    if (!candidates.ok()) {
      Error(candidates.status());
      return false;
    }
    AddCandidates(tok, *candidates, e->mutable_candidates());
  }
  Respond(std::move(r));
  if (MaybeFinal()) return false;
  return --remaining_ > 0;
}

absl::StatusOr<std::span<const SequenceInput>> StepOpJob::PlanForward() {
  StepSessionState& s = *state_;
  const v1::Forward& op = request_.forward();
  if (op.top_candidates() > static_cast<uint32_t>(kMaxTopCandidates)) {
    return absl::InvalidArgumentError(absl::StrCat("forward.top_candidates: ", op.top_candidates(),
                                                   " is more than ", kMaxTopCandidates));
  }
  const int k = op.top_candidates() == 0 ? 5 : static_cast<int>(op.top_candidates());
  const uint32_t gen = static_cast<uint32_t>(s.session->gen_length());
  std::vector<int32_t> positions;
  positions.reserve(op.positions_size());
  for (int i = 0; i < op.positions_size(); ++i) {
    const uint32_t p = op.positions(i);
    if (p >= gen) {
      return absl::InvalidArgumentError(absl::StrCat(
          "forward.positions[", i, "]: ", p, " is outside the generated region [0, ", gen, ")"));
    }
    positions.push_back(static_cast<int32_t>(p));
  }
  return s.session->PlanForward(positions, k);
}

void StepOpJob::FinishForward(double forward_seconds) {
  StepSessionState& s = *state_;
  absl::StatusOr<ForwardReport> report = s.session->FinishForward(forward_seconds);
  if (!report.ok()) {
    Error(report.status());
    return;
  }
  v1::StepResponse r;
  v1::ForwardResult* f = r.mutable_forward();
  f->set_step(s.session->history_size());
  f->set_forward_seconds(report->forward_seconds);
  AddCandidates(s.model->tokenizer(), report->candidates, f->mutable_candidates());
  Respond(std::move(r));
}

void StepOpJob::RunCommit() {
  StepSessionState& s = *state_;
  std::vector<int32_t> positions, tokens;
  const uint32_t gen = static_cast<uint32_t>(s.session->gen_length());
  const uint32_t vocab = static_cast<uint32_t>(s.model->config().n_vocab);
  for (int i = 0; i < request_.commit().tokens_size(); ++i) {
    const v1::CommittedToken& t = request_.commit().tokens(i);
    if (t.position() >= gen) {
      Error(absl::InvalidArgumentError(
          absl::StrCat("commit.tokens[", i, "].position: ", t.position(),
                       " is outside the generated region [0, ", gen, ")")));
      return;
    }
    if (std::string why = OutsideVocabulary(t.token_id(), vocab); !why.empty()) {
      Error(absl::InvalidArgumentError(
          absl::StrCat("commit.tokens[", i, "].token_id: ", t.token_id(), " ", why)));
      return;
    }
    positions.push_back(static_cast<int32_t>(t.position()));
    tokens.push_back(static_cast<int32_t>(t.token_id()));
  }
  if (absl::Status status = s.session->Commit(positions, tokens); !status.ok()) {
    Error(status);
    return;
  }
  const bool done = s.session->done();
  v1::StepResponse r;
  v1::StepEvent* e = r.mutable_step();
  *e = StepEventNow(done);
  if (!positions.empty()) {
    e->set_block_index(*std::max_element(positions.begin(), positions.end()) /
                       std::max(1, s.spec.sampler.EffectiveBlockLength()));
  }
  AddCommitted(s.model->tokenizer(), positions, tokens, 0, e);
  Respond(std::move(r));
  MaybeFinal();
}

void StepOpJob::RunRewind() {
  StepSessionState& s = *state_;
  const uint32_t to = request_.rewind().to_step();
  if (to > static_cast<uint32_t>(s.session->history_size())) {
    Error(absl::FailedPreconditionError(absl::StrCat("rewind.to_step: ", to, " is beyond the ",
                                                     s.session->history_size(),
                                                     " steps of the history")));
    return;
  }
  if (absl::Status status = s.session->Rewind(static_cast<int>(to)); !status.ok()) {
    Error(status);
    return;
  }
  // The text starts over: the next StepEvent's delta covers the whole stable prefix.
  s.text.Reset();
  s.completed = s.session->done();
  v1::StepResponse r;
  r.mutable_rewound()->set_step(s.session->history_size());
  r.mutable_rewound()->set_masked_remaining(s.session->masked_remaining());
  Respond(std::move(r));
}

}  // namespace dllm
