// GenerationRelay: the EventSink of one HTTP generation. The GenerateMailbox
// calls Write and Close from whichever thread moved its state (the engine's,
// the watchdog's); the HTTP connection's thread takes them with Next(),
// sends what they carry, and acknowledges each write to the mailbox
// (OnWriteDone), as the gRPC reactor does. Meanwhile it keeps waking up to
// see whether the client went away, which blocking in a write would not.
// RunGeneration is the whole HTTP call of one generation around it.
#ifndef DLLM_SERVICE_HTTP_GENERATION_RELAY_H_
#define DLLM_SERVICE_HTTP_GENERATION_RELAY_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "dllm/v1/dllm.pb.h"
#include "service/engine/admission.h"
#include "service/engine/generate_stream.h"
#include "service/engine/generation_request.h"
#include "service/http/http_server.h"

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

// How an HTTP generation goes on after an event: on, or cancelled because
// the client went away or the endpoint has all the text it needs.
enum class Verdict { kGoOn, kClientGone, kTextComplete };
struct GenerationHooks {
  // Once the request is in, with its id; false: the client is gone.
  std::function<bool(const std::string& request_id)> admitted;
  std::function<Verdict(const v1::GenerateEvent& event)> on_event;
};

// One generation admitted through `admission` (counted under `rpc`) and
// relayed to this thread: `hooks.admitted` runs once it is in,
// `hooks.on_event` for each event. A call ended early (the client went
// away, or the endpoint has the text it needs) cancels the job. Returns the
// admission's refusal, else how the call ended (CANCELLED after an early
// end).
absl::StatusOr<absl::Status> RunGeneration(Admission& admission, const GenerationRequest& request,
                                           RpcKind rpc, HttpResponder& out,
                                           const GenerationHooks& hooks);

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_GENERATION_RELAY_H_
