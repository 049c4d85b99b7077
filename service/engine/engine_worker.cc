#include "service/engine/engine_worker.h"

#include <algorithm>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "absl/strings/str_cat.h"
#include "engine/model/forward.h"
#include "engine/parallel/arena.h"
#include "engine/session/denoise_session.h"
#include "service/metrics/service_metrics.h"

namespace dllm {
namespace {

// Hands the heap's free pages back to the kernel. Each request frees its
// activations, logits and stream buffers when it ends; without this, glibc
// keeps them mapped and resident memory drifts with the mix of canvas sizes
// served, which hides real leaks and inflates what the pod appears to need.
void ReturnFreeHeapPages() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace

EngineWorker::EngineWorker(std::shared_ptr<const Model> model, const ThreadPlan& plan,
                           const EngineOptions& options, ServiceMetrics* metrics,
                           std::unique_ptr<LogitsSource> forward)
    : model_(std::move(model)),
      plan_(plan),
      options_(options),
      metrics_(ServiceMetrics::OrNoOp(metrics)),
      forward_(std::move(forward)) {
  options_.max_running = std::max(1, options_.max_running);
  options_.max_batch_requests = std::max(1, options_.max_batch_requests);
  if (options_.max_batch_rows <= 0) {
    // Without a model (the scheduling tests' scripted jobs) no step has rows.
    options_.max_batch_rows =
        model_ == nullptr ? 1 << 20
                          : DefaultMaxBatchRows(model_->config(), options_.memory_budget_bytes);
  }
  options_.max_queue = std::max(0, options_.max_queue);
  options_.max_sessions = std::max(0, options_.max_sessions);
}

EngineWorker::~EngineWorker() { Stop(); }

namespace {

// The engine's pass for a row budget: canvases up to the budget (or the
// context), and a head staging buffer so that a batch of requests runs the
// output head once per 64 rows rather than once per request. A canvas
// model's exact cache lets a step's rows read far more positions than it
// computes (the prompt and finished canvases): four times the budget.
ForwardLimits PassLimits(const ModelConfig& model, int max_rows) {
  ForwardLimits limits;
  limits.max_rows = max_rows;
  const int64_t positions = model.canvas_length > 0 ? 4 * int64_t{max_rows} : max_rows;
  limits.max_positions = static_cast<int>(std::min<int64_t>(positions, model.n_ctx_train));
  limits.head_stage_rows = std::min(max_rows, 64);
  return limits;
}

}  // namespace

int DefaultMaxBatchRows(const ModelConfig& model, uint64_t memory_budget_bytes) {
  constexpr int kCeiling = 8192, kFloor = 256;
  const int64_t context = std::max<int64_t>(1, model.n_ctx_train);
  const int whole = static_cast<int>(std::min<int64_t>(kCeiling, 2 * context));
  int rows = whole;
  if (memory_budget_bytes > 0) {
    const uint64_t share = memory_budget_bytes / 4;
    while (rows > kFloor && EngineWorker::PassBytes(model, rows) > share) {
      rows -= std::max(1, rows / 8);
    }
  }
  return std::max(rows, std::min(kFloor, whole));
}

void EngineWorker::Start(std::function<void(const absl::Status&)> on_ready) {
  thread_ = std::thread([this, on_ready = std::move(on_ready)] {
    arena_ = MakeArena(plan_);
    absl::Status warm = CreatePass();
    if (warm.ok() && options_.warm_up) warm = WarmUp();
    if (warm.ok()) ready_ = true;
    if (on_ready) on_ready(warm);
    Loop();
    RunInArena([this] { pass_.reset(); });
    std::lock_guard<std::mutex> lock(mu_);
    ReleaseLocked(pass_bytes_);
    pass_bytes_ = 0;
    PublishLoadLocked();
  });
}

absl::Status EngineWorker::WarmUp() {
  // A short generation that fits any context the loader accepts (>= 2).
  const int gen = static_cast<int>(std::min<int64_t>(4, model_->config().n_ctx_train - 1));
  SamplerConfig c = DefaultSamplerConfig(model_->config(), gen);
  const int32_t bos = model_->config().tokens.bos;
  std::vector<int32_t> prompt = {bos >= 0 ? bos : 0};
  absl::Status status;
  RunInArena([&] {
    absl::StatusOr<std::unique_ptr<DenoiseSession>> session =
        DenoiseSession::Create(model_, c, prompt, pass_.get());
    if (!session.ok()) {
      status = session.status();
      return;
    }
    status = (*session)->Advance().status();
  });
  if (!status.ok())
    return absl::Status(status.code(), absl::StrCat("warm-up step: ", status.message()));
  return status;
}

uint64_t EngineWorker::PassBytes(const ModelConfig& model, int max_batch_rows) {
  return ForwardPass::ActivationBytes(model, PassLimits(model, max_batch_rows));
}

absl::Status EngineWorker::CreatePass() {
  if (model_ == nullptr) return absl::OkStatus();
  const ForwardLimits limits = PassLimits(model_->config(), options_.max_batch_rows);
  const uint64_t bytes = PassBytes(model_->config(), options_.max_batch_rows);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!FitsLocked(bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the engine's forward for a batch of ", options_.max_batch_rows, " rows needs ",
          BytesText(bytes), " of activations, more than the memory budget of ",
          BytesText(options_.memory_budget_bytes),
          options_.max_batch_rows_from_budget
              ? ": raise --memory-budget-mb (it set the row budget) or lower --max-batch-rows"
              : ": lower --max-batch-rows"));
    }
    reserved_bytes_ += bytes;
    pass_bytes_ = bytes;
    PublishLoadLocked();
  }
  absl::Status status;
  RunInArena([&] {
    absl::StatusOr<std::unique_ptr<ForwardPass>> pass = ForwardPass::Create(model_, limits);
    if (pass.ok()) {
      pass_ = std::move(*pass);
      if (forward_ == nullptr) forward_ = SharedForwardLogits(pass_.get());
    } else {
      status = pass.status();
    }
  });
  return status;
}

void EngineWorker::RunInArena(const std::function<void()>& fn) { arena_->execute(fn); }

void EngineWorker::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  wake_.notify_one();
}

void EngineWorker::CancelAll(const absl::Status& why) {
  std::vector<std::shared_ptr<EngineJob>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs.assign(queue_.begin(), queue_.end());
    jobs.insert(jobs.end(), running_.begin(), running_.end());
    for (const auto& j : in_flight_) {
      if (j != nullptr) jobs.push_back(j);
    }
  }
  for (const auto& job : jobs) job->Cancel(why);
}

bool EngineWorker::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout,
                           [this] { return queue_.empty() && running_requests_ == 0; });
}

void EngineWorker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    wake_.notify_one();
  }
  // Jobs are cancelled outside the worker's lock (lock order: job, then worker).
  CancelAll(absl::UnavailableError("server is shutting down"));
  if (thread_.joinable()) thread_.join();
}

double EngineWorker::last_cancel_latency_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_cancel_latency_;
}

// Ends `job` (engine thread): Finish inside the arena, then release its
// reservation and slot, so that a free slot means the job is fully over,
// then Deliver: a client hears of the end only once it could come back.
void EngineWorker::FinishJob(const std::shared_ptr<EngineJob>& job, const absl::Status& status,
                             bool was_running) {
  // Stop latency: from the cancel, or from the deadline itself when it passed
  // first (the engine notices a deadline only between layers).
  EngineClock::time_point stop_cause{};
  {
    std::lock_guard<std::mutex> job_lock(job->mu_);
    if (job->cancel_.load()) stop_cause = job->cancel_time_;
  }
  if (status.code() == absl::StatusCode::kDeadlineExceeded &&
      job->deadline() != EngineClock::time_point::max() &&
      (stop_cause == EngineClock::time_point{} || job->deadline() < stop_cause)) {
    stop_cause = job->deadline();
  }
  if (stop_cause != EngineClock::time_point{} && !status.ok()) {
    job->stop_latency_seconds_ = SecondsBetween(stop_cause, EngineClock::now());
  }
  RunInArena([&] { job->Finish(status); });
  // Deliver (tell the client) only after the slot and the memory are free.
  struct DeliverAtExit {
    EngineJob* job;
    ~DeliverAtExit() { job->Deliver(); }
  } deliver{job.get()};
  {
    std::lock_guard<std::mutex> job_lock(job->mu_);
    job->worker_ = nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (was_running) {
    std::replace(in_flight_.begin(), in_flight_.end(), job, std::shared_ptr<EngineJob>());
    if (job->is_request_) --running_requests_;
  }
  ReleaseLocked(job->reserved_bytes_);
  // A stop because the text is complete (a stop string) is the client's
  // success, not a cancel: dllm_cancellation_latency_seconds leaves it out.
  if (job->stop_latency_seconds_ >= 0 && !status.GetPayload(kTextCompletePayload).has_value()) {
    last_cancel_latency_ = job->stop_latency_seconds_;
    metrics_->OnCancelled(last_cancel_latency_);
  }
  PublishLoadLocked();
  idle_cv_.notify_all();
}

absl::Status EngineWorker::EndStatus(const EngineJob& job, const absl::Status& status) {
  if (job.cancelled()) return job.cancel_status();
  if (job.deadline() <= EngineClock::now()) return absl::DeadlineExceededError("deadline passed");
  return status;
}

void EngineWorker::PollBetweenLayers(std::vector<BatchMember>* members) {
  const EngineClock::time_point now = EngineClock::now();
  for (const BatchMember& m : *members) {
    if (!m.job->cancelled() && m.job->deadline() <= now) {
      m.job->Cancel(absl::DeadlineExceededError("deadline passed"));
    }
  }
  std::vector<std::pair<std::shared_ptr<EngineJob>, bool>> ended;  // job, was running
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto stops = [now](const std::shared_ptr<EngineJob>& j) {
      return j->cancelled() || j->deadline() <= now;
    };
    for (auto* list : {&queue_, &running_}) {
      for (auto it = list->begin(); it != list->end();) {
        if (stops(*it)) {
          ended.emplace_back(std::move(*it), list == &running_);
          it = list->erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  for (const auto& [j, was_running] : ended) {
    const absl::Status late =
        was_running ? absl::DeadlineExceededError("deadline passed")
                    : absl::DeadlineExceededError("deadline passed while the request was queued");
    FinishJob(j, j->cancelled() ? j->cancel_status() : late, was_running);
  }
  // Batch members that were stopped: their `stop` is set, so the pass drops
  // their sequences at this boundary and touches nothing of theirs again
  // but that flag, which lives in the job: `members` keeps the job alive
  // until the pass is over.
  for (BatchMember& m : *members) {
    if (m.ended || !m.job->cancelled()) continue;
    m.ended = true;
    FinishJob(m.job, m.job->cancel_status(), /*was_running=*/true);
  }
}

void EngineWorker::Requeue(std::shared_ptr<EngineJob> job) {
  std::lock_guard<std::mutex> lock(mu_);
  std::replace(in_flight_.begin(), in_flight_.end(), job, std::shared_ptr<EngineJob>());
  job->ready_since_ = EngineClock::now();
  running_.push_back(std::move(job));
}

int64_t EngineWorker::PlanTurn(std::vector<BatchMember>* members) {
  // Plan the running jobs' units in round-robin order while they fit. A job
  // is taken off the running list only once it is in the turn, so one that
  // does not fit stays first for the next turn.
  batch_.sequences.clear();
  int64_t rows = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.clear();
  }
  for (;;) {
    std::shared_ptr<EngineJob> job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (running_.empty() || static_cast<int>(members->size()) >= options_.max_batch_requests) {
        break;
      }
      job = running_.front();
    }
    // Off the running list and into in_flight_ at once, so that CancelAll
    // always finds it.
    const auto take = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      running_.pop_front();
      in_flight_.push_back(job);
    };
    if (job->cancelled() || job->deadline() <= EngineClock::now()) {
      take();
      FinishJob(job, EndStatus(*job, absl::OkStatus()), /*was_running=*/true);
      continue;
    }
    absl::StatusOr<std::span<const SequenceInput>> plan;
    RunInArena([&] { plan = job->Plan(pass_.get()); });
    if (!plan.ok()) {
      take();
      FinishJob(job, EndStatus(*job, plan.status()), /*was_running=*/true);
      continue;
    }
    int64_t job_rows = 0;
    for (const SequenceInput& in : *plan) job_rows += in.row_end - in.row_begin;
    if (!members->empty() && rows + job_rows > options_.max_batch_rows) break;
    take();
    rows += job_rows;
    batch_.sequences.insert(batch_.sequences.end(), plan->begin(), plan->end());
    members->push_back({std::move(job), !plan->empty(), false});
  }
  return rows;
}

void EngineWorker::CompleteTurn(std::vector<BatchMember>& members, const absl::Status& status,
                                const ForwardStats& stats, double seconds) {
  for (BatchMember& m : members) {
    if (m.ended) continue;  // ended between layers
    std::shared_ptr<EngineJob> job = std::move(m.job);
    absl::StatusOr<bool> more = false;
    if (m.forward && !status.ok()) {
      more = status;
    } else if (!job->cancelled()) {
      RunInArena([&] {
        more = m.forward ? job->Complete(stats, seconds) : job->Complete(ForwardStats{}, 0.0);
      });
    }
    if (more.ok() && *more && !job->cancelled()) {
      Requeue(std::move(job));
      continue;
    }
    FinishJob(job, EndStatus(*job, more.ok() ? absl::OkStatus() : more.status()),
              /*was_running=*/true);
  }
}

void EngineWorker::RunTurn() {
  std::vector<BatchMember> members;
  const int64_t rows = PlanTurn(&members);
  if (members.empty()) return;
  const EngineClock::time_point start = EngineClock::now();
  for (const BatchMember& m : members) {
    metrics_->OnBatchWait(SecondsBetween(m.job->ready_since_, start));
  }
  absl::Status status;
  ForwardStats stats;
  if (rows > 0) {
    metrics_->OnBatch(static_cast<int>(members.size()), rows);
    LayerCheck check;
    check.poll = [this, &members] { PollBetweenLayers(&members); };
    if (forward_ == nullptr) {
      status = absl::FailedPreconditionError("the engine has no forward pass to run a batch");
    } else {
      RunInArena([&] { status = forward_->Run(batch_, &check, &stats); });
    }
  }
  const double seconds = SecondsBetween(start, EngineClock::now());
  // The forward's op times once, however many requests it carried; each
  // member's step then reports its own rows.
  if (rows > 0 && status.ok()) metrics_->OnForward(stats, seconds);
  CompleteTurn(members, status, stats, seconds);
}

void EngineWorker::Loop() {
  bool worked_since_trim = false;
  for (;;) {
    std::vector<std::pair<std::shared_ptr<EngineJob>, absl::Status>> dropped;
    bool has_work = false;
    if (worked_since_trim) {
      bool idle;
      {
        std::lock_guard<std::mutex> lock(mu_);
        idle = running_.empty() && queue_.empty();
      }
      if (idle) {
        ReturnFreeHeapPages();
        worked_since_trim = false;
      }
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto has_news = [this] {
        if (stopping_ || !running_.empty()) return true;
        if (queue_.empty()) return false;
        return running_requests_ < options_.max_running ||
               std::any_of(queue_.begin(), queue_.end(),
                           [](const auto& j) { return j->cancelled(); });
      };
      wake_.wait(lock, has_news);
      const EngineClock::time_point now = EngineClock::now();
      // Queued requests that were cancelled or ran out of time never start.
      for (auto it = queue_.begin(); it != queue_.end();) {
        const std::shared_ptr<EngineJob>& j = *it;
        if (stopping_ || j->cancelled() || j->deadline() <= now) {
          // The cancel reason is read after unlocking (it takes the job's
          // lock, which comes before the worker's).
          dropped.emplace_back(j, stopping_ ? absl::UnavailableError("server is shutting down")
                                            : absl::DeadlineExceededError(
                                                  "deadline passed while the request was queued"));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      while (!stopping_ && running_requests_ < options_.max_running && !queue_.empty()) {
        std::shared_ptr<EngineJob> next = std::move(queue_.front());
        queue_.pop_front();
        next->queue_seconds_ = SecondsBetween(next->admitted_, now);
        next->ready_since_ = now;
        ++running_requests_;
        running_.push_back(std::move(next));
      }
      has_work = !running_.empty();
      if (!has_work && stopping_ && dropped.empty()) return;
      PublishLoadLocked();
    }
    for (const auto& [j, status] : dropped) {
      FinishJob(j, j->cancelled() ? j->cancel_status() : status, /*was_running=*/false);
    }
    if (!has_work) continue;
    worked_since_trim = true;
    RunTurn();
  }
}

}  // namespace dllm
