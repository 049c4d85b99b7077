#include "service/grpc/step_reactor.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/base/stopwatch.h"
#include "service/engine/generate_job.h"
#include "service/engine/request_validation.h"
#include "service/grpc/diffusion_lm_service.h"
#include "service/grpc/grpc_status.h"
#include "service/grpc/proto_request.h"
#include "service/grpc/request_decoder.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

StepReactor::StepReactor(DiffusionLmService* service, grpc::CallbackServerContext* context)
    : service_(service),
      admission_(&service->admission()),
      context_(context),
      started_(std::chrono::steady_clock::now()) {
  outbox_ =
      std::make_shared<StepOutbox>(this, admission_->session_idle_seconds(), admission_->metrics());
  state_ = std::make_shared<StepSessionState>(admission_->shared_model(), outbox_,
                                              admission_->metrics());
  outbox_->set_request_id(NewRequestId());
  if (absl::Status s = admission_->CheckAvailableCounted(RpcKind::kStep); !s.ok()) {
    rejected_ = true;
    outbox_->Fail(s);
    return;
  }
  admission_->CallStarted();
  registered_ = true;
  admission_->WatchSession(outbox_);
  outbox_->Start();
}

void StepReactor::Close(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    end_status_ = status;
  }
  // The session's slot and memory are freed before the client hears that
  // the call ended, so that it may open the next one at once. The
  // DenoiseSession belongs to the engine's arena: it goes there, then the
  // lease; a stopping worker runs `done` without `fn`.
  std::shared_ptr<StepSessionState> state = state_;
  const auto release = [state] {
    state->session.reset();
    state->lease.reset();
  };
  const grpc::Status end = ToGrpcStatus(status);
  const auto finish = [this, release, end](const absl::Status&) {
    release();
    Finish(end);
  };
  if (state->lease == nullptr || !admission_->worker()->Post(release, finish).ok()) {
    finish(absl::OkStatus());
  }
}

void StepReactor::Write(const v1::StepResponse* response) {
  write_buffer_ = EncodeMessage(*response);
  StartWrite(&write_buffer_);
}

void StepReactor::OnReadDone(bool ok) {
  if (!ok) {
    if (context_->IsCancelled()) {
      OnCancel();
    } else {
      // The client half-closed: no more ops, the session ends.
      outbox_->End(absl::OkStatus());
    }
    return;
  }
  v1::StepRequest request;
  if (absl::Status s = DecodeRequest(read_buffer_, &request); !s.ok()) {
    service_->OnMalformed(*context_, RpcKind::kStep, "Step", s);
    outbox_->Fail(s);
    return;
  }
  const uint64_t seq = request.seq();
  outbox_->BeginOp();
  switch (request.op_case()) {
    case v1::StepRequest::kOpen:
      HandleOpen(request);
      return;
    case v1::StepRequest::kClose: {
      v1::StepResponse r;
      r.mutable_closed();
      outbox_->Post(seq, std::move(r));
      outbox_->End(absl::OkStatus());
      outbox_->EndOp();
      return;
    }
    case v1::StepRequest::OP_NOT_SET:
      outbox_->PostError(seq, absl::InvalidArgumentError("op: not set"));
      outbox_->EndOp();
      return;
    default:
      if (!state_->open) {
        outbox_->PostError(seq,
                           absl::FailedPreconditionError("no session is open: send Open first"));
        outbox_->EndOp();
        return;
      }
      Submit(request);
      return;
  }
}

void StepReactor::HandleOpen(const v1::StepRequest& request) {
  const uint64_t seq = request.seq();
  if (state_->open) {
    outbox_->PostError(
        seq, absl::FailedPreconditionError(absl::StrCat(
                 "a session is already open (", state_->session_id, "): one session per stream")));
    outbox_->EndOp();
    return;
  }
  if (absl::Status s = admission_->CheckAvailable(); !s.ok()) {
    // The drain began after this call started: no new session.
    outbox_->Fail(s);
    return;
  }
  const Model& model = admission_->model();
  absl::StatusOr<GenerationSpec> spec =
      ValidateOpen(request.open(), model, admission_->model_path());
  if (!spec.ok()) {
    outbox_->PostError(seq, spec.status());
    outbox_->EndOp();
    return;
  }
  const EngineWorker::Reservation reservation = ReservationFor(model.config(), *spec);
  absl::StatusOr<std::unique_ptr<EngineWorker::SessionLease>> lease =
      admission_->worker()->OpenSession(reservation);
  if (!lease.ok()) {
    // No slot or no memory: the call ends (the client retries on a new stream).
    if (lease.status().code() == absl::StatusCode::kResourceExhausted) {
      context_->AddTrailingMetadata("retry-after-ms", "1000");
    }
    rejected_ = true;
    outbox_->Fail(lease.status());
    return;
  }
  const uint32_t asked = request.open().idle_timeout_seconds();
  const int server = admission_->session_idle_seconds();
  outbox_->set_idle_timeout(asked > 0 ? static_cast<int>(std::min<uint32_t>(asked, server))
                                      : server);
  outbox_->set_request_id(spec->request_id);
  state_->session_id = absl::StrCat("sess-", NewRequestId().substr(4));
  state_->spec = std::move(*spec);
  state_->lease = std::move(*lease);
  Submit(request);
}

void StepReactor::Submit(const v1::StepRequest& request) {
  auto job = std::make_shared<StepOpJob>(state_, request);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = job;
  }
  if (absl::Status s = admission_->worker()->SubmitSessionWork(job); !s.ok()) outbox_->Fail(s);
}

void StepReactor::CancelJob(const absl::Status& why) {
  std::shared_ptr<EngineJob> job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job = job_;
  }
  if (job != nullptr) job->Cancel(why);
}

void StepReactor::OnWriteDone(bool ok) {
  // A failed write means the call is over (client gone, or its deadline
  // passed: the same reason OnCancel would give); stop the engine's work now.
  if (!ok) CancelJob(WhyCancelled(*context_, arrived_));
  outbox_->OnWriteDone(ok);
}

void StepReactor::OnCancel() {
  const absl::Status why = WhyCancelled(*context_, arrived_);
  CancelJob(why);
  outbox_->Fail(why.code() == absl::StatusCode::kCancelled
                    ? absl::CancelledError("the client cancelled the session")
                    : why);
}

void StepReactor::OnDone() {
  CancelJob(absl::CancelledError("the call ended"));
  outbox_->Detach();
  // The DenoiseSession belongs to the engine's arena: destroy it there, then
  // free the slot, so a free slot means the session is fully gone. A job
  // dropped by a stopping worker never runs, but its `done` does.
  std::shared_ptr<StepSessionState> state = state_;
  const auto release = [state] {
    state->session.reset();
    state->lease.reset();
  };
  if (!admission_->worker()->Post(release, [release](const absl::Status&) { release(); }).ok()) {
    release();
  }
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = end_status_;
  }
  if (registered_) {
    const double seconds = SecondsSince(started_);
    // Only opened sessions finished a request; a client that ended its
    // session before the canvas was complete closed it.
    if (!rejected_ && state_->open) {
      const FinishKind kind = status.ok() && !state_->completed ? FinishKind::kClosed
                                                                : FinishKindOf(status, state_->eos);
      admission_->metrics()->OnFinished(RpcKind::kStep, kind, status.code(), seconds, state_->steps,
                                        state_->generated);
    } else if (!rejected_) {
      admission_->metrics()->OnCallEnded(RpcKind::kStep, status.code());
    }
    const std::string why = status.ok() ? "" : absl::StrFormat(" (%s)", status.message());
    std::fprintf(stderr, "dllm-server: session %s: %d steps, %.1f ms, %s%s\n",
                 state_->spec.request_id.empty() ? "(not opened)" : state_->spec.request_id.c_str(),
                 state_->steps.load(), seconds * 1e3,
                 absl::StatusCodeToString(status.code()).c_str(), why.c_str());
    admission_->CallEnded();
  }
  delete this;
}

}  // namespace dllm
