#include "service/server/generate_stream.h"

#include "service/server/metrics_hooks.h"

namespace dllm {

void MergeStepEvents(v1::StepEvent&& next, v1::StepEvent* into) {
  into->set_step(next.step());
  into->set_planned_steps(next.planned_steps());
  into->set_block_index(next.block_index());
  for (v1::CommittedToken& t : *next.mutable_committed()) *into->add_committed() = std::move(t);
  into->set_masked_remaining(next.masked_remaining());
  into->set_stable_length(next.stable_length());
  into->mutable_text_delta()->append(next.text_delta());
  if (next.canvas_size() > 0) *into->mutable_canvas() = std::move(*next.mutable_canvas());
  for (v1::PositionCandidates& c : *next.mutable_candidates()) {
    *into->add_candidates() = std::move(c);
  }
  if (next.has_timings()) {
    v1::StepTimings* t = into->mutable_timings();
    t->set_step_seconds(t->step_seconds() + next.timings().step_seconds());
    t->set_forward_seconds(t->forward_seconds() + next.timings().forward_seconds());
    t->set_sample_seconds(t->sample_seconds() + next.timings().sample_seconds());
    for (const auto& [op, seconds] : next.timings().op_seconds()) {
      (*t->mutable_op_seconds())[op] += seconds;
    }
  }
  into->set_merged_steps(into->merged_steps() + next.merged_steps());
  into->set_final_follows(next.final_follows());
}

GenerateMailbox::GenerateMailbox(std::string request_id, int heartbeat_seconds, EventSink* sink,
                                 ServiceMetrics* metrics)
    : request_id_(std::move(request_id)),
      heartbeat_(std::chrono::seconds(heartbeat_seconds)),
      metrics_(metrics),
      sink_(sink),
      last_write_(Clock::now()) {}

void GenerateMailbox::PostLocked(v1::GenerateEvent event) {
  event.set_request_id(request_id_);
  pending_.push_back(std::move(event));
}

void GenerateMailbox::PostStarted(const v1::Started& started) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || close_wanted_) return;
    v1::GenerateEvent e;
    *e.mutable_started() = started;
    PostLocked(std::move(e));
    action = NextLocked();
  }
  Run(action);
}

void GenerateMailbox::PostStep(v1::StepEvent step) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || close_wanted_) return;
    // A Progress waiting behind the write in flight says less than this event.
    if (!pending_.empty() && pending_.back().has_progress()) pending_.pop_back();
    if (!pending_.empty() && pending_.back().has_step()) {
      MergeStepEvents(std::move(step), pending_.back().mutable_step());
      ++coalesced_;
    } else {
      v1::GenerateEvent e;
      *e.mutable_step() = std::move(step);
      PostLocked(std::move(e));
    }
    action = NextLocked();
  }
  Run(action);
}

void GenerateMailbox::PostFinal(const v1::Final& final) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || close_wanted_) return;
    if (!pending_.empty() && pending_.back().has_progress()) pending_.pop_back();
    v1::GenerateEvent e;
    *e.mutable_final() = final;
    PostLocked(std::move(e));
    final_posted_ = true;
    close_wanted_ = true;
    close_status_ = absl::OkStatus();
    action = NextLocked();
  }
  Run(action);
}

void GenerateMailbox::Fail(const absl::Status& status) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || close_wanted_) return;
    pending_.clear();
    close_wanted_ = true;
    close_status_ = status;
    action = NextLocked();
  }
  Run(action);
}

void GenerateMailbox::SetProgress(int step, int planned_steps, int masked_remaining) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.set_step(step);
  progress_.set_planned_steps(planned_steps);
  progress_.set_masked_remaining(masked_remaining);
}

bool GenerateMailbox::MaybeHeartbeat(Clock::time_point now) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || sink_ == nullptr) return false;
    if (close_wanted_ || in_flight_ || !pending_.empty() || now - last_write_ < heartbeat_) {
      return true;
    }
    v1::GenerateEvent e;
    *e.mutable_progress() = progress_;
    PostLocked(std::move(e));
    action = NextLocked();
  }
  Run(action);
  return true;
}

GenerateMailbox::Action GenerateMailbox::NextLocked() {
  if (in_flight_ || closed_ || sink_ == nullptr) return Action::kNone;
  if (!pending_.empty()) {
    current_ = std::move(pending_.front());
    pending_.pop_front();
    in_flight_ = true;
    last_write_ = Clock::now();
    ++sent_;
    return Action::kWrite;
  }
  if (close_wanted_) {
    closed_ = true;
    return Action::kClose;
  }
  return Action::kNone;
}

void GenerateMailbox::Run(Action action) {
  // The sink is only touched here, outside the lock, and only by whoever
  // moved the state machine (one write in flight, one close), so it cannot
  // be detached in between: OnDone follows Close.
  switch (action) {
    case Action::kNone:
      return;
    case Action::kWrite:
      sink_->Write(&current_);
      return;
    case Action::kClose: {
      DLLM_METRICS_CALL(metrics_, OnEventsSent(RpcKind::kGenerate, sent_, coalesced_));
      sink_->Close(close_status_);
      return;
    }
  }
}

void GenerateMailbox::OnWriteDone(bool ok) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_ = false;
    if (!ok && !closed_) {
      // The client went away; the engine hears of it through OnCancel.
      pending_.clear();
      if (!close_wanted_) {
        close_wanted_ = true;
        close_status_ = absl::CancelledError("the stream broke while writing");
      }
    }
    action = NextLocked();
  }
  Run(action);
}

void GenerateMailbox::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  sink_ = nullptr;
  closed_ = true;
}

int GenerateMailbox::events_sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_;
}

int GenerateMailbox::events_coalesced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return coalesced_;
}

}  // namespace dllm
