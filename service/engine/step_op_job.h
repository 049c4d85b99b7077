// One op of a Step session (Open, Advance, Forward, Commit, Rewind), run on
// the engine thread. Advance{n} takes one turn per step, planned so that
// the worker batches it with other sessions' and Generate requests' steps. Op-level failures are
// in-band OpErrors and leave the session usable; cancellation or a stopped
// engine ends the call with that status.
#ifndef DLLM_SERVICE_ENGINE_STEP_OP_JOB_H_
#define DLLM_SERVICE_ENGINE_STEP_OP_JOB_H_

#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dllm/v1/dllm.pb.h"
#include "service/engine/engine_worker.h"
#include "service/engine/step_session_state.h"

namespace dllm {

// One op of a session on the engine thread. Finish ends the op (OK) or the
// call (CANCELLED, UNAVAILABLE, ...).
class StepOpJob : public EngineJob {
 public:
  StepOpJob(std::shared_ptr<StepSessionState> state, v1::StepRequest request)
      : state_(std::move(state)), request_(std::move(request)) {}

  // A unit is the op, or one step of an Advance{n}: Advance steps and the
  // Forward probe plan their sequences for the turn's batch; Open, Commit
  // and Rewind need no forward and run when the unit completes.
  absl::StatusOr<std::span<const SequenceInput>> Plan(ForwardPass* pass) override;
  absl::StatusOr<bool> Complete(const ForwardStats& forward, double forward_seconds) override;
  void Finish(const absl::Status& status) override { status_ = status; }
  void Deliver() override;

 private:
  bool RunOpen(ForwardPass* pass);
  // Why the Advance cannot run (checked on its first turn), or OK.
  absl::Status CheckAdvance() const;
  // Its first turn: sets the steps it runs.
  void StartAdvance();
  // What follows each step of an Advance; true while steps remain.
  bool AfterAdvance(const StepReport& report);
  // The Forward probe's sequences (validating the op), then its answer.
  absl::StatusOr<std::span<const SequenceInput>> PlanForward();
  void FinishForward(double forward_seconds);
  void RunCommit();
  void RunRewind();
  // A StepEvent for the session's latest history entry.
  v1::StepEvent StepEventNow(bool done);
  // Posts Final when the canvas is complete; true if it did.
  bool MaybeFinal();
  void Error(const absl::Status& status) { state_->outbox->PostError(request_.seq(), status); }
  void Respond(v1::StepResponse response) {
    state_->outbox->Post(request_.seq(), std::move(response));
  }

  std::shared_ptr<StepSessionState> state_;
  v1::StepRequest request_;
  int64_t remaining_ = -1;       // Advance steps left; -1 before the first turn
  ForwardPass* pass_ = nullptr;  // the engine's, as the last Plan() got it (Open creates over it)
  absl::Status planned_;         // why the planned unit cannot run (told in-band), or OK
  absl::Status status_;          // Finish's, for Deliver
};

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_STEP_OP_JOB_H_
