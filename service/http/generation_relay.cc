#include "service/http/generation_relay.h"

#include <utility>

#include "engine/base/status_macros.h"

namespace dllm {

void GenerationRelay::Write(const v1::GenerateEvent* event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(Item{*event, std::nullopt});
  }
  cv_.notify_one();
}

void GenerationRelay::Close(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(Item{std::nullopt, status});
  }
  cv_.notify_one();
}

std::optional<GenerationRelay::Item> GenerationRelay::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !items_.empty(); })) return std::nullopt;
  Item item = std::move(items_.front());
  items_.pop_front();
  return item;
}

namespace {

// How often a request waiting for the engine looks at its client.
constexpr auto kClientCheck = std::chrono::milliseconds(20);

// However the call ends (an exception included), the job stops, the mailbox
// lets go of the relay and the drain stops waiting for the call.
class CallEnd {
 public:
  CallEnd(Admission& admission, AdmittedGeneration& admitted)
      : admission_(admission), admitted_(admitted) {}
  CallEnd(const CallEnd&) = delete;
  CallEnd& operator=(const CallEnd&) = delete;
  ~CallEnd() {
    admitted_.job->Cancel(absl::CancelledError("the HTTP request ended"));
    admitted_.mailbox->Detach();
    admission_.CallEnded();
  }

 private:
  Admission& admission_;
  AdmittedGeneration& admitted_;
};

}  // namespace

absl::StatusOr<absl::Status> RunGeneration(Admission& admission, const GenerationRequest& request,
                                           RpcKind rpc, HttpResponder& out,
                                           const GenerationHooks& hooks) {
  GenerationRelay relay;
  DLLM_ASSIGN_OR_RETURN(
      AdmittedGeneration admitted,
      admission.AdmitGeneration(request, &relay, EngineClock::time_point::max(), rpc));
  const CallEnd call_end(admission, admitted);
  GenerateMailbox& mailbox = *admitted.mailbox;
  EngineJob& job = *admitted.job;
  Verdict verdict = hooks.admitted(mailbox.request_id()) ? Verdict::kGoOn : Verdict::kClientGone;
  for (;;) {
    if (verdict == Verdict::kClientGone) {
      job.Cancel(absl::CancelledError("the HTTP client disconnected"));
    } else if (verdict == Verdict::kTextComplete) {
      job.Cancel(TextCompleteStatus("the text is complete"));
    }
    std::optional<GenerationRelay::Item> item = relay.Next(kClientCheck);
    if (!item) {
      if (verdict == Verdict::kGoOn && out.ClientGone()) verdict = Verdict::kClientGone;
      continue;
    }
    if (item->end) return *item->end;
    if (verdict == Verdict::kGoOn) verdict = hooks.on_event(*item->event);
    mailbox.OnWriteDone(verdict != Verdict::kClientGone);
  }
}

}  // namespace dllm
