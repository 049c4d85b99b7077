// The Step RPC's stream (serving.md 2.3), between the engine thread and the
// reactor: responses are written in order, one write in flight; the next op
// is read only after every response of the current one was written; the call
// ends (idle timeout, drain, Close, cancel) only when no sink call is in
// progress. It sees no gRPC type.
#ifndef DLLM_SERVICE_ENGINE_STEP_OUTBOX_H_
#define DLLM_SERVICE_ENGINE_STEP_OUTBOX_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "dllm/v1/dllm.pb.h"
#include "service/engine/ordered_writer.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

// The reactor's side of a Step stream. Read is called only when no op is
// in progress and nothing is left to write (OrderedWriter says the rest).
using StepSink = OrderedWriter<v1::StepResponse>::Sink;

// Thread-safe. Write ordering, Fail and broken writes: OrderedWriter.
class StepOutbox : public OrderedWriter<v1::StepResponse> {
 public:
  using Clock = std::chrono::steady_clock;

  // `sink` (non-owning) must stay valid until Detach(); `metrics` may be null (nothing is
  // recorded).
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

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_STEP_OUTBOX_H_
