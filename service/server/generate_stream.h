// GenerateMailbox: the hand-off between the engine thread, which produces a
// Generate stream's events, and the gRPC reactor, which writes them one at
// a time (serving.md 1.4). Posting never blocks: while a write is in flight,
// step events wait in the mailbox, and a new step event is merged into a
// waiting one (committed lists joined, text deltas concatenated, newest
// canvas kept, `merged_steps` added) instead of queueing without bound. The
// Final event is never merged or dropped. Heartbeats (Progress) are posted
// by a ticker when nothing was written for `heartbeat_seconds`. No gRPC
// type appears here; the reactor implements EventSink.
#ifndef DLLM_SERVICE_SERVER_GENERATE_STREAM_H_
#define DLLM_SERVICE_SERVER_GENERATE_STREAM_H_

#include <chrono>
#include <deque>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "dllm/v1/dllm.pb.h"

namespace dllm {

class ServiceMetrics;

// The writing end of one stream (the reactor). The mailbox calls Write at
// most once per OnWriteDone and Close exactly once, never under its lock.
class EventSink {
 public:
  virtual ~EventSink() = default;
  // Starts writing `event`, which stays valid until OnWriteDone.
  virtual void Write(const v1::GenerateEvent* event) = 0;
  // Ends the call with `status` (after the last write completed).
  virtual void Close(const absl::Status& status) = 0;
};

// Merges `next` into `into` (the older event) as if both steps were one.
void MergeStepEvents(v1::StepEvent&& next, v1::StepEvent* into);

// Thread-safe.
class GenerateMailbox {
 public:
  using Clock = std::chrono::steady_clock;

  // `sink` (non-owning) must stay valid until Detach(); `metrics` may be null.
  GenerateMailbox(std::string request_id, int heartbeat_seconds, EventSink* sink,
                  ServiceMetrics* metrics = nullptr);

  // Engine side.
  void PostStarted(const v1::Started& started);
  void PostStep(v1::StepEvent step);
  // The last event; the call then ends with OK.
  void PostFinal(const v1::Final& final);
  // Ends the call with `status` (not OK); waiting events are dropped.
  void Fail(const absl::Status& status);
  // What the next heartbeat reports.
  void SetProgress(int step, int planned_steps, int masked_remaining);

  // Heartbeat ticker: posts a Progress when nothing was written for the
  // heartbeat period. Returns false once the stream is over (forget it).
  bool MaybeHeartbeat(Clock::time_point now);

  // Reactor side.
  void OnWriteDone(bool ok);
  void Detach();  // the call is done; the sink is gone

  const std::string& request_id() const { return request_id_; }
  int events_sent() const;
  int events_coalesced() const;

 private:
  void PostLocked(v1::GenerateEvent event);
  // Starts the next write or the close when nothing is in flight; the
  // caller does it after unlocking.
  enum class Action { kNone, kWrite, kClose };
  Action NextLocked();
  void Run(Action action);

  const std::string request_id_;
  const Clock::duration heartbeat_;
  ServiceMetrics* const metrics_;

  mutable std::mutex mu_;
  EventSink* sink_;  // non-owning; null after Detach
  std::deque<v1::GenerateEvent> pending_;
  v1::GenerateEvent current_;  // the write in flight
  bool in_flight_ = false;
  bool final_posted_ = false;
  bool close_wanted_ = false;
  bool closed_ = false;
  absl::Status close_status_;
  Clock::time_point last_write_;
  v1::Progress progress_;
  int sent_ = 0;
  int coalesced_ = 0;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_SERVER_GENERATE_STREAM_H_
