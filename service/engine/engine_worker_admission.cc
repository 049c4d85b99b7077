// The engine worker's bounds: the jobs it takes, what each reserves, and
// the admission of requests and Step sessions against the caps and the
// memory budget (engine_worker.h). The engine thread's loop is
// engine_worker.cc.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/session/denoise_session.h"
#include "service/engine/engine_worker.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

std::string BytesText(uint64_t bytes) {
  if (bytes < (uint64_t{1} << 20)) return absl::StrCat(bytes, " bytes");
  return absl::StrCat(bytes >> 20, " MiB");
}

EngineJob::EngineJob() : arrival_(EngineClock::now()) {}
EngineJob::~EngineJob() = default;

void EngineJob::Cancel(absl::Status why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancel_.exchange(true)) return;
  cancel_status_ = why.ok() ? absl::CancelledError("cancelled") : std::move(why);
  cancel_time_ = EngineClock::now();
  if (worker_ != nullptr) worker_->Wake();
}

absl::Status EngineJob::cancel_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancel_status_;
}

absl::StatusOr<bool> FunctionJob::Complete(const ForwardStats&, double) {
  if (fn_) fn_();
  fn_ = nullptr;
  return false;
}

void FunctionJob::Deliver() {
  if (done_) done_(status_);
}

EngineWorker::SessionLease::~SessionLease() {
  std::lock_guard<std::mutex> lock(worker_->mu_);
  --worker_->sessions_open_;
  worker_->ReleaseLocked(bytes_);
  worker_->PublishLoadLocked();
}

EngineWorker::Reservation EngineWorker::ReservationFor(const ModelConfig& model,
                                                       const SamplerConfig& config,
                                                       const CachingOptions& caching, int canvas) {
  return {DenoiseSession::StateBytes(model, config, caching, canvas),
          DenoiseSession::Limits(config, canvas).max_rows};
}

absl::Status EngineWorker::CheckRows(int rows) const {
  if (rows <= options_.max_batch_rows) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the request's canvas needs ", rows,
      " rows a step (twice the canvas under CFG), more than "
      "the engine's batch of ",
      options_.max_batch_rows, " rows (",
      options_.max_batch_rows_from_budget ? "--memory-budget-mb" : "--max-batch-rows", ")"));
}

absl::Status EngineWorker::CheckReservation(RpcKind rpc, const Reservation& reservation) {
  for (absl::Status fits : {CheckRows(reservation.rows), CheckCanEverFit(reservation.bytes)}) {
    if (!fits.ok()) {
      metrics_->OnRejected(rpc, RejectReason::kInvalid, fits.code());
      return fits;
    }
  }
  return absl::OkStatus();
}

absl::Status EngineWorker::CheckCanEverFit(uint64_t bytes) const {
  if (options_.memory_budget_bytes == 0) return absl::OkStatus();
  uint64_t pass_bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pass_bytes = pass_bytes_;
  }
  const uint64_t most =
      options_.memory_budget_bytes - std::min(pass_bytes, options_.memory_budget_bytes);
  if (bytes <= most) return absl::OkStatus();
  // Permanent: no amount of waiting frees more than the whole budget, so
  // this is no 429 to retry.
  return absl::FailedPreconditionError(absl::StrCat(
      "the request needs ", BytesText(bytes), " of activations and logits, more than the ",
      BytesText(most), " the memory budget of ", BytesText(options_.memory_budget_bytes),
      " (--memory-budget-mb) can ever hold beside the engine's forward pass; ask for a shorter "
      "canvas"));
}

bool EngineWorker::FitsLocked(uint64_t bytes) const {
  return options_.memory_budget_bytes == 0 ||
         (bytes <= options_.memory_budget_bytes &&
          reserved_bytes_ <= options_.memory_budget_bytes - bytes);
}

void EngineWorker::ReleaseLocked(uint64_t bytes) {
  reserved_bytes_ -= std::min(bytes, reserved_bytes_);
}

int EngineWorker::WaitingLocked() const {
  // The queue also holds requests admitted into a free running slot that the
  // engine thread has not picked up yet (it is mid-step): those do not wait
  // for a slot, and counting them let the gauge exceed --max-queue.
  const int queued = static_cast<int>(queue_.size());
  return std::min(queued, std::max(0, running_requests_ + queued - options_.max_running));
}

void EngineWorker::PublishLoadLocked() {
  metrics_->SetLoad(running_requests_, WaitingLocked(), sessions_open_);
  metrics_->SetActivationBytes(reserved_bytes_);
}

// Lock order: a job's mu_ is never taken while holding the worker's (Cancel()
// takes the job's, then the worker's), so jobs are set up before locking.
void EngineWorker::Attach(EngineJob* job, uint64_t reserved_bytes, bool is_request) {
  std::lock_guard<std::mutex> job_lock(job->mu_);
  job->worker_ = this;
  job->reserved_bytes_ = reserved_bytes;
  job->is_request_ = is_request;
  job->admitted_ = EngineClock::now();
}

void EngineWorker::Detach(EngineJob* job) {
  std::lock_guard<std::mutex> job_lock(job->mu_);
  job->worker_ = nullptr;
}

absl::Status EngineWorker::Submit(std::shared_ptr<EngineJob> job, Reservation reservation) {
  DLLM_RETURN_IF_ERROR(CheckReservation(job->rpc(), reservation));
  Attach(job.get(), reservation.bytes, /*is_request=*/true);
  return Admit(std::move(job), reservation.bytes);
}

absl::Status EngineWorker::Admit(std::shared_ptr<EngineJob> job, uint64_t reserved_bytes) {
  EngineJob* raw = job.get();
  std::unique_lock<std::mutex> lock(mu_);
  const auto refuse = [&](absl::Status status) {
    lock.unlock();
    Detach(raw);
    return status;
  };
  if (stopping_) return refuse(absl::UnavailableError("server is shutting down"));
  if (!ready_) return refuse(absl::UnavailableError("the model is still warming up"));
  const int admitted = running_requests_ + static_cast<int>(queue_.size());
  if (admitted >= options_.max_running + options_.max_queue) {
    metrics_->OnRejected(raw->rpc(), RejectReason::kQueueFull,
                         absl::StatusCode::kResourceExhausted);
    return refuse(absl::ResourceExhaustedError(
        absl::StrCat("server is at capacity: ", running_requests_, " running and ", queue_.size(),
                     " waiting requests (max_running ", options_.max_running, ", max_queue ",
                     options_.max_queue, ")")));
  }
  if (!FitsLocked(reserved_bytes)) {
    metrics_->OnRejected(raw->rpc(), RejectReason::kMemory, absl::StatusCode::kResourceExhausted);
    return refuse(absl::ResourceExhaustedError(
        absl::StrCat("not enough memory: the request needs ", BytesText(reserved_bytes),
                     " of activations and logits, ",
                     BytesText(options_.memory_budget_bytes -
                               std::min(reserved_bytes_, options_.memory_budget_bytes)),
                     " of the ", BytesText(options_.memory_budget_bytes), " budget are free")));
  }
  reserved_bytes_ += reserved_bytes;
  queue_.push_back(std::move(job));
  PublishLoadLocked();
  wake_.notify_one();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<EngineWorker::SessionLease>> EngineWorker::OpenSession(
    Reservation reservation) {
  DLLM_RETURN_IF_ERROR(CheckReservation(RpcKind::kStep, reservation));
  const uint64_t reserved_bytes = reservation.bytes;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return absl::UnavailableError("server is shutting down");
  if (!ready_) return absl::UnavailableError("the model is still warming up");
  if (sessions_open_ >= options_.max_sessions) {
    metrics_->OnRejected(RpcKind::kStep, RejectReason::kSessionsFull,
                         absl::StatusCode::kResourceExhausted);
    return absl::ResourceExhaustedError(
        absl::StrCat("too many open sessions (max_sessions ", options_.max_sessions, ")"));
  }
  if (!FitsLocked(reserved_bytes)) {
    metrics_->OnRejected(RpcKind::kStep, RejectReason::kMemory,
                         absl::StatusCode::kResourceExhausted);
    return absl::ResourceExhaustedError(absl::StrCat(
        "not enough memory for the session: it needs ", BytesText(reserved_bytes), ", ",
        BytesText(options_.memory_budget_bytes -
                  std::min(reserved_bytes_, options_.memory_budget_bytes)),
        " of the ", BytesText(options_.memory_budget_bytes), " budget are free"));
  }
  reserved_bytes_ += reserved_bytes;
  ++sessions_open_;
  PublishLoadLocked();
  return std::unique_ptr<SessionLease>(new SessionLease(this, reserved_bytes));
}

absl::Status EngineWorker::SubmitSessionWork(std::shared_ptr<EngineJob> job) {
  Attach(job.get(), 0, /*is_request=*/false);
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    lock.unlock();
    Detach(job.get());
    return absl::UnavailableError("server is shutting down");
  }
  job->ready_since_ = EngineClock::now();
  running_.push_back(std::move(job));
  wake_.notify_one();
  return absl::OkStatus();
}

absl::Status EngineWorker::Post(std::function<void()> fn,
                                std::function<void(const absl::Status&)> done) {
  return SubmitSessionWork(std::make_shared<FunctionJob>(std::move(fn), std::move(done)));
}

EngineLoad EngineWorker::load() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineLoad l;
  l.running = running_requests_;
  l.waiting = WaitingLocked();
  l.sessions_open = sessions_open_;
  l.reserved_bytes = reserved_bytes_;
  l.budget_bytes = options_.memory_budget_bytes;
  return l;
}

}  // namespace dllm
