// EngineWorker: the one thread that runs all model work, inside the oneTBB
// arena (serving.md 6.3). RPC threads only validate, admit and enqueue; the
// engine thread owns the one ForwardPass every request's steps run
// through, creates every DenoiseSession in its arena, and ends each job
// exactly once. Each turn it takes the running jobs in round-robin order
// and runs the next unit of as many as fit (--max-batch-requests jobs,
// --max-batch-rows rows) as one forward (one job protocol, EngineJob: a
// unit plans its sequences, or none, and completes after the forward): their computed rows stacked
// for every GEMM, attention, caches and sampling per request, so a request's tokens and logits do
// not depend on who else is in the batch. A job that does not fit goes first next turn. Admission
// is bounded three ways: running requests (--max-running), waiting requests (--max-queue) and bytes
// of memory reserved at admission (--memory-budget-mb), so a request is refused up front instead of
// failing mid-step: the engine's pass is reserved once, at start; each request reserves its K/V
// caches and logits, and must fit the pass's rows alone. Step RPC sessions hold a separate slot
// (--max-sessions) and their memory for as long as they live, and run their operations as work
// items on the same thread. No gRPC type appears here.
#ifndef DLLM_SERVICE_ENGINE_ENGINE_WORKER_H_
#define DLLM_SERVICE_ENGINE_ENGINE_WORKER_H_

#include <tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/base/stopwatch.h"
#include "engine/model/forward.h"
#include "engine/model/model.h"
#include "engine/parallel/cpu_topology.h"
#include "engine/sampler/sampler_config.h"
#include "engine/session/logits_source.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

class ServiceMetrics;
class EngineWorker;

using EngineClock = MonotonicClock;

struct EngineOptions {
  int max_running = 1;  // requests advancing at once (round-robin per turn)
  // Jobs whose steps one forward stacks (1: one step at a time), and the
  // rows that forward computes at most over all of them; 0 rows =
  // DefaultMaxBatchRows(). A request must fit the rows alone.
  int max_batch_requests = 8;
  int max_batch_rows = 0;
  // max_batch_rows is the default that the memory budget lowered: refusals
  // over it name --memory-budget-mb rather than --max-batch-rows.
  bool max_batch_rows_from_budget = false;
  int max_queue = 8;     // requests admitted and waiting for a running slot
  int max_sessions = 4;  // open Step sessions
  // Activation + logits bytes all admitted work may reserve together, e.g.
  // MemAvailable at start minus a margin; 0 = no limit.
  uint64_t memory_budget_bytes = 0;
  bool warm_up = true;  // run one denoising step before reporting ready
};

// "512 bytes" under a MiB, else whole MiB ("36 MiB"): so that a refusal
// never reads "needs 0 MiB, 0 MiB free".
std::string BytesText(uint64_t bytes);

// The row budget when --max-batch-rows is not given: room for the model's
// whole context (twice: a CFG pair), less if the forward's activations for
// that many rows would take more than a quarter of `memory_budget_bytes`
// (0: no budget), and at most 8192 rows; never below 256 rows or one
// request's default canvas.
int DefaultMaxBatchRows(const ModelConfig& model, uint64_t memory_budget_bytes);

// Live numbers for GetServerInfo and the load gauges.
struct EngineLoad {
  int running = 0;  // requests (not session work) in the running set
  int waiting = 0;  // requests admitted, not yet running
  int sessions_open = 0;
  uint64_t reserved_bytes = 0;
  uint64_t budget_bytes = 0;  // 0 = no limit
};

// What EngineJob::Plan returns for a unit that needs no forward.
inline constexpr std::span<const SequenceInput> kNoForward{};

// One unit of admitted work: a Generate request, or one operation of a Step
// session. Every unit runs the same way, on the engine thread inside the
// arena: Plan() names the forward the unit needs, the worker stacks the
// planned sequences of the turn's jobs into one forward and runs it, then
// calls Complete(). Cancel() and the accessors are safe from any thread.
class EngineJob {
 public:
  EngineJob();
  virtual ~EngineJob();
  EngineJob(const EngineJob&) = delete;
  EngineJob& operator=(const EngineJob&) = delete;

  // Plans the job's next unit (setting up first if need be: sessions are
  // created over the engine's `pass`, DenoiseSession::Create(..., pass))
  // and returns the sequences its forward computes, with `stop` =
  // stop_flag(); they stay valid until Complete(). Empty: the unit needs no
  // forward (a Step session's Open, Commit or Rewind, a FunctionJob, a step
  // that commits nothing, an error the unit reports in-band). Planning must
  // not change what the job computes: a job that did not fit the batch is
  // planned again next turn. An error ends the job.
  virtual absl::StatusOr<std::span<const SequenceInput>> Plan(ForwardPass* pass) = 0;
  // The rest of the planned unit once the turn's forward ran: `forward` and
  // `forward_seconds` are what that forward took (the whole batch's; zeros
  // when the unit had no sequences). True while more units remain. An error
  // ends the job.
  virtual absl::StatusOr<bool> Complete(const ForwardStats& forward, double forward_seconds) = 0;
  // Exactly once, after the last Complete (OK) or instead of further units,
  // with how the job ended: OK, the reason it was stopped (Cancel()'s: the
  // client's CANCELLED, DEADLINE_EXCEEDED, the server's UNAVAILABLE), or
  // Plan's or Complete's error. Release arena-bound state (the DenoiseSession) here and
  // keep what the client is to be told: the worker frees the job's slot and
  // memory next, and only then calls Deliver(), so that a client who sees
  // its call end can be admitted again at once.
  virtual void Finish(const absl::Status& status) = 0;
  virtual void Deliver() {}

  // Stops the job, for `why` (the first reason given is kept): a queued job
  // is dropped, a running one stops within one layer. Idempotent.
  void Cancel(absl::Status why = absl::CancelledError("cancelled by the client"));
  bool cancelled() const { return cancel_.load(std::memory_order_relaxed); }
  // Cancel()'s reason; OK while not cancelled.
  absl::Status cancel_status() const;

  // Set before submitting; EngineClock::time_point::max() = none.
  void set_deadline(EngineClock::time_point deadline) { deadline_ = deadline; }
  EngineClock::time_point deadline() const { return deadline_; }
  // When the job was created (the request's arrival).
  EngineClock::time_point arrival() const { return arrival_; }
  // Seconds between admission and the first Plan (valid from then on).
  double queue_seconds() const { return queue_seconds_; }
  // For a job ended by a cancel or its deadline: seconds from the cancel (or
  // the deadline passing) to the engine stopping its work, set just before
  // Finish; -1 otherwise.
  double stop_latency_seconds() const { return stop_latency_seconds_; }
  // What the job's metrics are counted under (the front end that admitted it).
  void set_rpc(RpcKind rpc) { rpc_ = rpc; }
  RpcKind rpc() const { return rpc_; }

 protected:
  // Set once the job is cancelled (SequenceInput::stop of its planned step).
  const std::atomic<bool>* stop_flag() const { return &cancel_; }

 private:
  friend class EngineWorker;

  std::atomic<bool> cancel_{false};
  absl::Status cancel_status_;  // guarded by mu_
  EngineClock::time_point arrival_;
  EngineClock::time_point deadline_ = EngineClock::time_point::max();
  double queue_seconds_ = 0;
  double stop_latency_seconds_ = -1;
  RpcKind rpc_ = RpcKind::kGenerate;

  // Written by the worker; guarded by mu_ so Cancel() never wakes a worker
  // that has already finished this job.
  mutable std::mutex mu_;
  EngineWorker* worker_ = nullptr;  // non-owning; set while admitted
  EngineClock::time_point cancel_time_{};
  EngineClock::time_point admitted_{};
  EngineClock::time_point ready_since_{};  // when its next unit became ready to run
  uint64_t reserved_bytes_ = 0;
  bool is_request_ = true;  // counts against max_running / max_queue
};

// Runs `fn` once on the engine thread inside the arena (as a job that is
// never cancelled): e.g. to create or destroy a session's DenoiseSession.
// `done` gets OK, or UNAVAILABLE when the worker stopped first.
class FunctionJob : public EngineJob {
 public:
  FunctionJob(std::function<void()> fn, std::function<void(const absl::Status&)> done = nullptr)
      : fn_(std::move(fn)), done_(std::move(done)) {}
  absl::StatusOr<std::span<const SequenceInput>> Plan(ForwardPass*) override { return kNoForward; }
  absl::StatusOr<bool> Complete(const ForwardStats&, double) override;
  void Finish(const absl::Status& status) override { status_ = status; }
  void Deliver() override;

 private:
  std::function<void()> fn_;
  std::function<void(const absl::Status&)> done_;
  absl::Status status_;
};

class EngineWorker {
 public:
  // Holds one of --max-sessions slots and its reserved bytes; releases both
  // when destroyed (any thread). Its work items go through SubmitSessionWork.
  class SessionLease {
   public:
    ~SessionLease();
    uint64_t reserved_bytes() const { return bytes_; }

   private:
    friend class EngineWorker;
    SessionLease(EngineWorker* worker, uint64_t bytes) : worker_(worker), bytes_(bytes) {}
    EngineWorker* worker_;  // non-owning; outlives the lease
    uint64_t bytes_;
  };

  // `metrics` may be null (nothing is recorded); non-owning, outlives the
  // worker. `forward` runs the turns' batches; null: the engine's own
  // ForwardPass over `model` (tests without a model script it).
  EngineWorker(std::shared_ptr<const Model> model, const ThreadPlan& plan,
               const EngineOptions& options, ServiceMetrics* metrics = nullptr,
               std::unique_ptr<LogitsSource> forward = nullptr);
  ~EngineWorker();  // Stop()
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // Starts the engine thread: it creates the arena, runs the warm-up step
  // (options.warm_up) and then calls `on_ready` (on the engine thread) with
  // OK or the warm-up's error. Until then Submit answers UNAVAILABLE.
  void Start(std::function<void(const absl::Status&)> on_ready = nullptr);
  bool ready() const { return ready_.load(); }

  // What a generation reserves at admission: the bytes its DenoiseSession
  // keeps beside the engine's pass (DenoiseSession::StateBytes: K/V caches,
  // logits), and the rows one of its steps computes at most, for a canvas
  // of `canvas_tokens` (GenerationSpec::canvas_tokens).
  struct Reservation {
    uint64_t bytes = 0;
    int rows = 0;
  };
  static Reservation ReservationFor(const ModelConfig& model, const SamplerConfig& config,
                                    const CachingOptions& caching, int canvas_tokens);
  // Bytes the engine's pass takes for a batch of `max_batch_rows` rows
  // (reserved from the budget at start).
  static uint64_t PassBytes(const ModelConfig& model, int max_batch_rows);

  // Admits a request job. RESOURCE_EXHAUSTED when max_running + max_queue
  // requests are already admitted or its bytes do not fit the budget;
  // INVALID_ARGUMENT when its rows exceed the batch's row budget;
  // UNAVAILABLE before ready or after Stop. On OK the job gets exactly one
  // Finish. Never blocks on the engine.
  absl::Status Submit(std::shared_ptr<EngineJob> job, Reservation reservation);

  // Step sessions: RESOURCE_EXHAUSTED when max_sessions are open or the
  // bytes do not fit; UNAVAILABLE before ready or after Stop.
  absl::StatusOr<std::unique_ptr<SessionLease>> OpenSession(Reservation reservation);
  // Runs a session's work item in turn with the running requests (one unit
  // per turn), outside the request caps: its lease holds the memory.
  // UNAVAILABLE after Stop (then no Finish is called).
  absl::Status SubmitSessionWork(std::shared_ptr<EngineJob> job);
  // FunctionJob shorthand for SubmitSessionWork.
  absl::Status Post(std::function<void()> fn,
                    std::function<void(const absl::Status&)> done = nullptr);

  EngineLoad load() const;
  // options() has max_batch_rows resolved (never 0).
  const EngineOptions& options() const { return options_; }
  int threads() const { return plan_.threads; }

  // Cancels every admitted job with `why` (the end of a drain: UNAVAILABLE).
  void CancelAll(const absl::Status& why);
  // Waits until no request is queued or running; true when that happened
  // within `timeout`.
  bool WaitIdle(std::chrono::milliseconds timeout);
  // Refuses new work, ends queued jobs with UNAVAILABLE, cancels running
  // ones and joins the engine thread. Idempotent.
  void Stop();

  // Seconds from the latest Cancel() to the engine letting go of that job
  // (negative before any cancellation).
  double last_cancel_latency_seconds() const;

 private:
  friend class EngineJob;
  friend class SessionLease;

  void Loop();
  // One turn: plans the running jobs' units in order and runs as many as
  // fit (--max-batch-requests jobs, --max-batch-rows rows) as one forward,
  // then completes each.
  void RunTurn();
  // After a job's unit: back to the end of the running list, or ended.
  void Requeue(std::shared_ptr<EngineJob> job);
  void Wake();
  void Attach(EngineJob* job, uint64_t reserved_bytes, bool is_request);
  void Detach(EngineJob* job);
  absl::Status Admit(std::shared_ptr<EngineJob> job, uint64_t reserved_bytes);
  // INVALID_ARGUMENT when one step of `rows` rows cannot fit the pass.
  absl::Status CheckRows(int rows) const;
  // FAILED_PRECONDITION when `bytes` exceed what the memory budget holds
  // beside the pass even with nothing else admitted.
  absl::Status CheckCanEverFit(uint64_t bytes) const;
  // Both checks above, a refusal counted as `rpc`'s.
  absl::Status CheckReservation(RpcKind rpc, const Reservation& reservation);
  void RunInArena(const std::function<void()>& fn);
  void FinishJob(const std::shared_ptr<EngineJob>& job, const absl::Status& status,
                 bool was_running);
  // Between the layers of a forward: sets the cancel flag of each of the
  // batch's `members` whose deadline has passed, ends every other admitted
  // job that was cancelled or ran out of time, so none waits behind the
  // running step, and ends each member that was cancelled (its sequences'
  // `stop` has the pass drop them at this boundary), marking it ended.
  struct BatchMember {
    std::shared_ptr<EngineJob> job;
    bool forward = false;  // it planned sequences (else its unit needs no forward)
    bool ended = false;    // finished between layers (the pass dropped its sequences)
  };
  void PollBetweenLayers(std::vector<BatchMember>* members);
  // The turn's batch: the running jobs' planned units that fit, into
  // `members` and batch_; the rows they compute.
  int64_t PlanTurn(std::vector<BatchMember>* members);
  // Each member's Complete (or the forward's error) once the forward ran:
  // requeued while it has units left, else finished.
  void CompleteTurn(std::vector<BatchMember>& members, const absl::Status& status,
                    const ForwardStats& stats, double seconds);
  // How a job that stopped ends: its cancel reason, DEADLINE_EXCEEDED past
  // its deadline, else `status`.
  static absl::Status EndStatus(const EngineJob& job, const absl::Status& status);
  void ReleaseLocked(uint64_t bytes);
  bool FitsLocked(uint64_t bytes) const;
  // Requests waiting for a running slot (at most max_queue).
  int WaitingLocked() const;
  void PublishLoadLocked();
  absl::Status WarmUp();
  // Creates pass_ for options_.max_batch_rows (engine thread) and reserves its bytes.
  absl::Status CreatePass();

  std::shared_ptr<const Model> model_;
  ThreadPlan plan_;
  EngineOptions options_;
  ServiceMetrics* metrics_;  // non-owning; ServiceMetrics::NoOp() when none was given
  std::unique_ptr<tbb::task_arena> arena_;  // created on, and used only by, the engine thread
  std::unique_ptr<ForwardPass> pass_;       // likewise: every request's forwards run through it
  std::unique_ptr<LogitsSource> forward_;   // runs the batches: pass_, or the one given
  uint64_t pass_bytes_ = 0;                 // reserved for it from Start to Stop
  ForwardBatch batch_;                      // the turn's stacked sequences

  mutable std::mutex mu_;
  std::condition_variable wake_;                       // work arrived, a job was cancelled, or stop
  std::condition_variable idle_cv_;                    // requests finished
  std::deque<std::shared_ptr<EngineJob>> queue_;       // admitted requests, FIFO
  std::deque<std::shared_ptr<EngineJob>> running_;     // requests and session work, round-robin
  std::vector<std::shared_ptr<EngineJob>> in_flight_;  // this turn's jobs (out of running_)
  int running_requests_ = 0;
  int sessions_open_ = 0;
  uint64_t reserved_bytes_ = 0;
  bool stopping_ = false;
  std::atomic<bool> ready_{false};
  double last_cancel_latency_ = -1;
  std::thread thread_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_ENGINE_WORKER_H_
