// GenerationRelay: the EventSink of one HTTP generation. The GenerateMailbox
// calls Write and Close from whichever thread moved its state (the engine's,
// the watchdog's); the HTTP connection's thread takes them with Next(),
// sends what they carry, and acknowledges each write to the mailbox
// (OnWriteDone), as the gRPC reactor does. Meanwhile it keeps waking up to
// see whether the client went away, which blocking in a write would not.
#ifndef DLLM_SERVICE_HTTP_GENERATION_RELAY_H_
#define DLLM_SERVICE_HTTP_GENERATION_RELAY_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "absl/status/status.h"
#include "dllm/v1/dllm.pb.h"
#include "service/server/generate_stream.h"

namespace dllm {

// Thread-safe.
class GenerationRelay : public EventSink {
 public:
  // One event to send (acknowledge it), or the end of the call.
  struct Item {
    std::optional<v1::GenerateEvent> event;
    std::optional<absl::Status> end;
  };

  void Write(const v1::GenerateEvent* event) override;
  void Close(const absl::Status& status) override;

  // The next item, waiting at most `timeout`; nullopt when none came.
  std::optional<Item> Next(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_GENERATION_RELAY_H_
