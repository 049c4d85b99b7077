// StreamWatchdog: the one thread that looks after open streams between
// their events. Every tick it posts heartbeats on Generate streams with
// nothing to write (so proxies keep queued streams open), ends Step sessions
// idle past their timeout, and, once the drain began, ends every session
// with UNAVAILABLE after its current op. Streams are held weakly: one that
// ended is forgotten at the next tick.
#ifndef DLLM_SERVICE_ENGINE_STREAM_WATCHDOG_H_
#define DLLM_SERVICE_ENGINE_STREAM_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "service/engine/generate_stream.h"
#include "service/engine/step_outbox.h"

namespace dllm {

class StreamWatchdog {
 public:
  explicit StreamWatchdog(std::chrono::milliseconds tick = std::chrono::milliseconds(250));
  ~StreamWatchdog();  // stops the thread
  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  // Heartbeats for `mailbox` until its stream ends.
  void Watch(const std::shared_ptr<GenerateMailbox>& mailbox);
  // Idle timeout and drain for a Step session until its call ends.
  void Watch(const std::shared_ptr<StepOutbox>& outbox);
  // Ends every session (now and registered later) at once, not at the next tick.
  void StartDrain();

 private:
  void Loop();

  const std::chrono::milliseconds tick_;
  std::mutex mu_;
  std::condition_variable wake_;  // stop, or the drain started
  std::vector<std::weak_ptr<GenerateMailbox>> mailboxes_;
  std::vector<std::weak_ptr<StepOutbox>> sessions_;
  bool draining_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_STREAM_WATCHDOG_H_
