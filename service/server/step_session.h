// The Step RPC's session (serving.md 2.3): a client-driven DenoiseSession on
// one bidirectional stream. Three parts, none of which sees a gRPC type:
//  - StepOutbox, between the engine thread and the reactor: responses are
//    written in order, one write in flight; the next op is read only after
//    every response of the current one was written; the call ends (idle
//    timeout, drain, Close, cancel) only when no sink call is in progress.
//  - StepSessionState, what the session's engine jobs share; it outlives the
//    reactor, and its DenoiseSession is created and destroyed on the engine
//    thread.
//  - StepOpJob, one op (Open, Advance, Forward, Commit, Rewind) run on the
//    engine thread; Advance{n} takes one turn per step, so sessions and
//    Generate requests share the engine round-robin.
// Op-level failures are in-band OpErrors and leave the session usable;
// cancellation or a stopped engine ends the call with that status.
#ifndef DLLM_SERVICE_SERVER_STEP_SESSION_H_
#define DLLM_SERVICE_SERVER_STEP_SESSION_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/session/denoise_session.h"
#include "service/metrics/service_metrics.h"
#include "service/server/engine_worker.h"
#include "service/server/ordered_writer.h"
#include "service/server/request_validation.h"
#include "service/server/stream_events.h"

namespace dllm {



// The reactor's side of a Step stream. Read is called only when no op is
// in progress and nothing is left to write (OrderedWriter says the rest).
using StepSink = OrderedWriter<v1::StepResponse>::Sink;

// Thread-safe. Write ordering, Fail and broken writes: OrderedWriter.
class StepOutbox : public OrderedWriter<v1::StepResponse> {
 public:
  using Clock = std::chrono::steady_clock;

  // `sink` (non-owning) must stay valid until Detach(); `metrics` may be null (nothing is recorded).
  StepOutbox(StepSink* sink, int idle_timeout_seconds, ServiceMetrics* metrics = nullptr);

  // Starts reading the first op.
  void Start();

  // One op: BeginOp() when it was read, Post() for each of its responses,
  // EndOp() after the last one. Posts after the call ended are dropped.
  void BeginOp();
  void Post(uint64_t seq, v1::StepResponse response);
  // An OpError with the status's code and message.
  void PostError(uint64_t seq, const absl::Status& status);
  void EndOp();

  // Ends the call with `status` once the op in progress (if any) has
  // written all its responses (Close, drain, the client's half-close).
  void End(const absl::Status& status);

  // Echoed on every later response (the Open's request id).
  void set_request_id(std::string request_id);
  void set_idle_timeout(int seconds);
  // The watchdog's tick: ends the call with DEADLINE_EXCEEDED when it has waited for the
  // client's next op longer than the idle timeout. False once the call is over.
  bool MaybeExpire(Clock::time_point now);

 private:
  // The next op is read only between ops, and the call closes only after one.
  bool StartReadLocked() override;
  bool HoldCloseLocked() const override { return op_; }
  void OnClosing(int sent) override;

  ServiceMetrics* const metrics_;
  // Guarded by mu_.
  std::string request_id_;
  bool op_ = false;       // an op was read and has not ended
  bool reading_ = false;  // waiting for the client's next op
  Clock::duration idle_timeout_;
  Clock::time_point idle_since_;
};

// What a session's reactor and engine jobs share.
struct StepSessionState {
  StepSessionState(std::shared_ptr<const Model> model, std::shared_ptr<StepOutbox> outbox,
                   ServiceMetrics* metrics)
      : model(std::move(model)), outbox(std::move(outbox)), metrics(ServiceMetrics::OrNoOp(metrics)),
        text(&this->model->tokenizer()) {}

  const std::shared_ptr<const Model> model;
  const std::shared_ptr<StepOutbox> outbox;
  ServiceMetrics* const metrics;  // non-owning; NoOp() when none was given

  // Set by the reactor at Open, before the open job is submitted.
  GenerationSpec spec;
  std::string session_id;
  std::unique_ptr<EngineWorker::SessionLease> lease;

  // Engine thread only.
  std::unique_ptr<DenoiseSession> session;
  StableText text;

  // Read by the reactor.
  std::atomic<bool> open{false};
  std::atomic<int> steps{0};       // Advance steps run
  std::atomic<int> generated{0};   // tokens in the last Final
  std::atomic<bool> eos{false};    // the last Final ended with end-of-text
  std::atomic<bool> completed{false};  // a Final was sent (the canvas is complete)
};

// One op of a session on the engine thread. Finish ends the op (OK) or the
// call (CANCELLED, UNAVAILABLE, ...).
class StepOpJob : public EngineJob {
 public:
  StepOpJob(std::shared_ptr<StepSessionState> state, v1::StepRequest request)
      : state_(std::move(state)), request_(std::move(request)) {}

  absl::StatusOr<bool> RunStep(const LayerCheck& check) override;
  void Finish(const absl::Status& status) override { status_ = status; }
  void Deliver() override;

 private:
  bool RunOpen();
  absl::StatusOr<bool> RunAdvance(const LayerCheck& check);
  absl::Status RunForward(const LayerCheck& check);
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
  int64_t remaining_ = -1;  // Advance steps left; -1 before the first turn
  absl::Status status_;     // Finish's, for Deliver
};

}  // namespace dllm

#endif  // DLLM_SERVICE_SERVER_STEP_SESSION_H_
