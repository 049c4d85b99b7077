#include "service/engine/generate_stream.h"

#include "service/metrics/service_metrics.h"

namespace dllm {

void MergeStepEvents(v1::StepEvent&& next, v1::StepEvent* into) {
  into->set_step(next.step());
  into->set_planned_steps(next.planned_steps());
  into->set_block_index(next.block_index());
  if (next.has_canvas_step()) {
    // The entropy-bound sampler rewrites every position each step: the
    // merged event holds the latest step's tokens, not every step's.
    into->clear_committed();
    *into->mutable_canvas_step() = std::move(*next.mutable_canvas_step());
  }
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
                                 ServiceMetrics* metrics, RpcKind rpc)
    : OrderedWriter(sink),
      request_id_(std::move(request_id)),
      heartbeat_(std::chrono::seconds(heartbeat_seconds)),
      metrics_(ServiceMetrics::OrNoOp(metrics)),
      rpc_(rpc),
      last_write_(Clock::now()) {}

void GenerateMailbox::PostLocked(v1::GenerateEvent event) {
  event.set_request_id(request_id_);
  pending_.push_back(std::move(event));
}

void GenerateMailbox::PostStarted(const v1::Started& started) {
  Act([&] {
    if (!accepting_locked()) return;
    v1::GenerateEvent e;
    *e.mutable_started() = started;
    PostLocked(std::move(e));
  });
}

void GenerateMailbox::PostStep(v1::StepEvent step) {
  Act([&] {
    if (!accepting_locked()) return;
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
  });
}

void GenerateMailbox::PostFinal(const v1::Final& final) {
  Act([&] {
    if (!accepting_locked()) return;
    if (!pending_.empty() && pending_.back().has_progress()) pending_.pop_back();
    v1::GenerateEvent e;
    *e.mutable_final() = final;
    PostLocked(std::move(e));
    EndLocked(absl::OkStatus());
  });
}

void GenerateMailbox::SetProgress(int step, int planned_steps, int masked_remaining) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.set_step(step);
  progress_.set_planned_steps(planned_steps);
  progress_.set_masked_remaining(masked_remaining);
}

bool GenerateMailbox::MaybeHeartbeat(Clock::time_point now) {
  bool live = true;
  Act([&] {
    if (done_locked()) {
      live = false;
      return;
    }
    if (end_wanted_ || in_flight_ || !pending_.empty() || now - last_write_ < heartbeat_) return;
    v1::GenerateEvent e;
    *e.mutable_progress() = progress_;
    PostLocked(std::move(e));
  });
  return live;
}

void GenerateMailbox::OnClosing(int sent) { metrics_->OnEventsSent(rpc_, sent, coalesced_); }

int GenerateMailbox::events_coalesced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return coalesced_;
}

}  // namespace dllm
