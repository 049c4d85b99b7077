#include "service/engine/step_outbox.h"

#include <utility>

namespace dllm {

StepOutbox::StepOutbox(StepSink* sink, int idle_timeout_seconds, ServiceMetrics* metrics)
    : OrderedWriter(sink),
      metrics_(ServiceMetrics::OrNoOp(metrics)),
      idle_timeout_(std::chrono::seconds(idle_timeout_seconds)),
      idle_since_(Clock::now()) {}

void StepOutbox::Start() {
  Act([] {});
}

void StepOutbox::BeginOp() {
  std::lock_guard<std::mutex> lock(mu_);
  reading_ = false;
  op_ = true;
}

void StepOutbox::Post(uint64_t seq, v1::StepResponse response) {
  Act([&] {
    if (over_locked()) return;
    response.set_seq(seq);
    response.set_request_id(request_id_);
    pending_.push_back(std::move(response));
  });
}

void StepOutbox::PostError(uint64_t seq, const absl::Status& status) {
  v1::StepResponse r;
  r.mutable_error()->set_code(static_cast<int32_t>(status.code()));
  r.mutable_error()->set_message(std::string(status.message()));
  Post(seq, std::move(r));
}

void StepOutbox::EndOp() {
  Act([&] { op_ = false; });
}

void StepOutbox::End(const absl::Status& status) {
  Act([&] {
    reading_ = false;
    EndLocked(status);
  });
}

void StepOutbox::set_request_id(std::string request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  request_id_ = std::move(request_id);
}

void StepOutbox::set_idle_timeout(int seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_timeout_ = std::chrono::seconds(seconds);
}

bool StepOutbox::MaybeExpire(Clock::time_point now) {
  bool live = true;
  Act([&] {
    if (done_locked()) {
      live = false;
      return;
    }
    if (!reading_ || op_ || end_wanted_ || now - idle_since_ < idle_timeout_) return;
    EndLocked(absl::DeadlineExceededError(absl::StrCat(
        "session idle for more than ",
        std::chrono::duration_cast<std::chrono::seconds>(idle_timeout_).count(), " s")));
  });
  return live;
}

bool StepOutbox::StartReadLocked() {
  if (op_ || reading_) return false;
  reading_ = true;
  idle_since_ = Clock::now();
  return true;
}

void StepOutbox::OnClosing(int sent) { metrics_->OnEventsSent(RpcKind::kStep, sent, 0); }

}  // namespace dllm
