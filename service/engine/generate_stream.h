// GenerateMailbox: the hand-off between the engine thread, which produces a
// Generate stream's events, and the gRPC reactor, which writes them one at
// a time (serving.md 1.4). Posting never blocks: while a write is in flight,
// step events wait in the mailbox, and a new step event is merged into a
// waiting one (committed lists joined, text deltas concatenated, newest
// canvas kept, `merged_steps` added) instead of queueing without bound. The
// Final event is never merged or dropped. Heartbeats (Progress) are posted
// by the StreamWatchdog when nothing was written for `heartbeat_seconds`. The write
// ordering itself is OrderedWriter's, shared with the Step stream. No gRPC
// type appears here; the reactor implements EventSink.
#ifndef DLLM_SERVICE_ENGINE_GENERATE_STREAM_H_
#define DLLM_SERVICE_ENGINE_GENERATE_STREAM_H_

#include <chrono>
#include <deque>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "dllm/v1/dllm.pb.h"
#include "service/engine/ordered_writer.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

// The writing end of a Generate stream (the reactor).
using EventSink = OrderedWriter<v1::GenerateEvent>::Sink;

// Merges `next` into `into` (the older event) as if both steps were one.
void MergeStepEvents(v1::StepEvent&& next, v1::StepEvent* into);

// Thread-safe. Write ordering, End/Fail and broken writes: OrderedWriter.
class GenerateMailbox : public OrderedWriter<v1::GenerateEvent> {
 public:
  using Clock = std::chrono::steady_clock;

  // `sink` (non-owning) must stay valid until Detach(); `metrics` may be null (nothing is
  // recorded); `rpc` is the front end the events are counted under.
  GenerateMailbox(std::string request_id, int heartbeat_seconds, EventSink* sink,
                  ServiceMetrics* metrics = nullptr, RpcKind rpc = RpcKind::kGenerate);

  // Engine side. Nothing is posted once the stream is ending.
  void PostStarted(const v1::Started& started);
  void PostStep(v1::StepEvent step);
  // The last event; the call then ends with OK.
  void PostFinal(const v1::Final& final);
  // What the next heartbeat reports.
  void SetProgress(int step, int planned_steps, int masked_remaining);

  // The watchdog's tick: posts a Progress when nothing was written for the
  // heartbeat period. Returns false once the stream is over (forget it).
  bool MaybeHeartbeat(Clock::time_point now);

  const std::string& request_id() const { return request_id_; }
  int events_coalesced() const;

 private:
  bool accepting_locked() const { return !over_locked() && !end_wanted_; }
  void PostLocked(v1::GenerateEvent event);
  void OnWriteLocked() override { last_write_ = Clock::now(); }
  void OnClosing(int sent) override;

  const std::string request_id_;
  const Clock::duration heartbeat_;
  ServiceMetrics* const metrics_;
  const RpcKind rpc_;
  Clock::time_point last_write_;  // guarded by mu_
  v1::Progress progress_;
  int coalesced_ = 0;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_GENERATE_STREAM_H_
