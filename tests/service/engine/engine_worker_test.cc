// EngineWorker with scripted jobs (no model work except the warm-up test):
// admission caps, the memory budget, round-robin order, batches, sessions, queued
// deadlines and cancellation.
#include "service/engine/engine_worker.h"

#include <functional>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/wait.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;
using ::dllm::testing::StatusIs;

// Runs `steps` steps of one row each, appending its name to a shared log
// each step; with `hold`, its step's forward (HeldForward) waits until
// released or the job is stopped.
class ScriptedJob : public EngineJob {
 public:
  ScriptedJob(std::string name, int steps, std::vector<std::string>* log, std::mutex* mu)
      : name_(std::move(name)), steps_(steps), log_(log), mu_(mu) {
    sequence_[0].tokens = std::span<const int32_t>(&token_, 1);
    sequence_[0].row_end = 1;
    sequence_[0].stop = stop_flag();
  }

  absl::StatusOr<std::span<const SequenceInput>> Plan(ForwardPass*) override { return sequence_; }
  absl::StatusOr<bool> Complete(const ForwardStats&, double) override {
    {
      std::lock_guard<std::mutex> lock(*mu_);
      log_->push_back(name_);
    }
    return ++done_ < steps_;
  }
  void Finish(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(*mu_);
    finished = true;
    finish_status = status;
    finish_thread = std::this_thread::get_id();
  }
  void Deliver() override {
    if (on_deliver) on_deliver();
  }
  // Whether `in` is this job's sequence.
  bool Owns(const SequenceInput& in) const { return in.tokens.data() == &token_; }

  std::function<void()> on_deliver;  // runs when the client would be told
  std::atomic<bool> hold{false};
  std::atomic<bool> in_step{false};  // a step's forward has begun
  bool finished = false;
  absl::Status finish_status;
  std::thread::id finish_thread;

 private:
  std::string name_;
  int steps_;
  int done_ = 0;
  std::vector<std::string>* log_;
  std::mutex* mu_;
  int32_t token_ = 0;
  SequenceInput sequence_[1];
};

// The engine's forward for these tests, which have no model: a batch
// behaves like a pass with many layers, polling between them while any
// held job's sequence in it is still running, as the real pass does.
class HeldForward : public LogitsSource {
 public:
  void Register(std::shared_ptr<ScriptedJob> job) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  absl::Status Run(const ForwardBatch& batch, const LayerCheck* check,
                   ForwardStats* stats) override {
    for (;;) {
      bool holding = false, any_live = false;
      for (const SequenceInput& in : batch.sequences) {
        const bool stopped = in.stop != nullptr && in.stop->load();
        any_live = any_live || !stopped;
        const std::shared_ptr<ScriptedJob> job = Find(in);
        if (job == nullptr) continue;
        job->in_step = true;
        holding = holding || (job->hold.load() && !stopped);
      }
      if (!any_live) return absl::CancelledError("every sequence was stopped");
      if (check != nullptr && check->poll) check->poll();
      if (!holding) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (stats != nullptr) stats->rows = batch.rows();
    return absl::OkStatus();
  }
  ForwardLimits limits() const override { return {1 << 20, 1 << 20}; }

 private:
  std::shared_ptr<ScriptedJob> Find(const SequenceInput& in) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& j : jobs_) {
      if (j->Owns(in)) return j;
    }
    return nullptr;
  }
  std::mutex mu_;
  std::vector<std::shared_ptr<ScriptedJob>> jobs_;
};

// A generation-like job whose steps are planned for the batch (with no
// rows: these tests have no model): logs "plan:NAME" when planned and
// NAME when its step is finished.
class PlannedJob : public EngineJob {
 public:
  PlannedJob(std::string name, int steps, std::vector<std::string>* log, std::mutex* mu)
      : name_(std::move(name)), steps_(steps), log_(log), mu_(mu) {}
  absl::StatusOr<std::span<const SequenceInput>> Plan(ForwardPass*) override {
    Log("plan:" + name_);
    return kNoForward;
  }
  absl::StatusOr<bool> Complete(const ForwardStats&, double) override {
    Log(name_);
    return ++done_ < steps_;
  }
  void Finish(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(*mu_);
    finished = true;
    finish_status = status;
  }
  bool finished = false;  // guarded by *mu_
  absl::Status finish_status;

 private:
  void Log(std::string entry) {
    std::lock_guard<std::mutex> lock(*mu_);
    log_->push_back(std::move(entry));
  }
  std::string name_;
  int steps_;
  int done_ = 0;
  std::vector<std::string>* log_;
  std::mutex* mu_;
};

class EngineWorkerTest : public ::testing::Test {
 protected:
  std::unique_ptr<EngineWorker> Start(EngineOptions o) {
    o.warm_up = false;
    ThreadPlan plan;
    plan.threads = 1;
    auto forward = std::make_unique<HeldForward>();
    forward_ = forward.get();
    auto w = std::make_unique<EngineWorker>(nullptr, plan, o, nullptr, std::move(forward));
    w->Start();
    EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return w->ready(); }));
    return w;
  }
  std::shared_ptr<ScriptedJob> Job(const std::string& name, int steps) {
    auto job = std::make_shared<ScriptedJob>(name, steps, &log_, &mu_);
    if (forward_ != nullptr) forward_->Register(job);
    return job;
  }
  bool Finished(const std::shared_ptr<ScriptedJob>& j) {
    std::lock_guard<std::mutex> lock(mu_);
    return j->finished;
  }
  void WaitFinished(const std::shared_ptr<ScriptedJob>& j) {
    EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return Finished(j); }));
  }

  std::vector<std::string> log_;
  std::mutex mu_;
  HeldForward* forward_ = nullptr;  // the latest Start()'s, owned by its worker
};

// A cancelled request does not wait behind another request's step: the
// running step's between-layer poll ends it (issue: p99 cancel latency was a
// step of the other job).
TEST_F(EngineWorkerTest, CancellationPreemptsTheRunningStep) {
  EngineOptions o;
  o.max_running = 2;
  auto w = Start(o);
  auto a = Job("a", 3), b = Job("b", 3), c = Job("c", 3);
  a->hold = true;
  ASSERT_THAT(w->Submit(a, {0, 1}), IsOk());
  while (!a->in_step.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_THAT(w->Submit(b, {0, 1}), IsOk());  // runs next, behind a's held step
  ASSERT_THAT(w->Submit(c, {0, 1}), IsOk());  // queued (max_running 2)
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  b->Cancel();
  c->Cancel(absl::UnavailableError("server is shutting down"));
  WaitFinished(b);
  WaitFinished(c);
  EXPECT_FALSE(Finished(a));  // still in its step
  EXPECT_THAT(b->finish_status, StatusIs(absl::StatusCode::kCancelled, "cancelled by the client"));
  EXPECT_THAT(c->finish_status, StatusIs(absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_LT(w->last_cancel_latency_seconds(), 0.5);
  a->hold = false;
  WaitFinished(a);
  EXPECT_THAT(a->finish_status, IsOk());
}

// Issue #25: dllm_requests_waiting exceeded --max-queue: a request admitted
// into a free running slot sat in the queue while the engine was mid-step
// and was counted as waiting.
TEST_F(EngineWorkerTest, WaitingCountsOnlyRequestsBeyondTheRunningSlots) {
  EngineOptions o;
  o.max_running = 2;
  o.max_queue = 1;
  auto w = Start(o);
  auto a = Job("a", 1), b = Job("b", 1), c = Job("c", 1);
  a->hold = true;
  ASSERT_THAT(w->Submit(a, {0, 1}), IsOk());
  while (!a->in_step.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_THAT(w->Submit(b, {0, 1}), IsOk());  // a free slot; the engine is in a's step
  EXPECT_EQ(w->load().waiting, 0);
  ASSERT_THAT(w->Submit(c, {0, 1}), IsOk());  // beyond the two slots: waits
  EXPECT_EQ(w->load().waiting, 1);
  EXPECT_LE(w->load().waiting, o.max_queue);
  a->hold = false;
  WaitFinished(a);
  WaitFinished(b);
  WaitFinished(c);
  EXPECT_EQ(w->load().waiting, 0);
}

// The running job's own deadline stops it between layers, as
// DEADLINE_EXCEEDED (not CANCELLED).
TEST_F(EngineWorkerTest, DeadlineStopsTheRunningStep) {
  auto w = Start({});
  auto a = Job("a", 3);
  a->hold = true;
  a->set_deadline(EngineClock::now() + std::chrono::milliseconds(50));
  ASSERT_THAT(w->Submit(a, {0, 1}), IsOk());
  WaitFinished(a);
  EXPECT_THAT(a->finish_status, StatusIs(absl::StatusCode::kDeadlineExceeded, "deadline"));
}

// The slot and the memory are free before the client hears the end, so a
// client that starts its next request then is never refused.
TEST_F(EngineWorkerTest, SlotIsFreeWhenTheClientHearsTheEnd) {
  EngineOptions o;
  o.max_running = 1;
  o.max_queue = 0;
  o.memory_budget_bytes = 1000;
  auto w = Start(o);
  for (int i = 0; i < 20; ++i) {
    auto first = Job("first", 1);
    absl::Status second_admitted = absl::UnknownError("not tried");
    auto second = Job("second", 1);
    first->on_deliver = [&] { second_admitted = w->Submit(second, {900, 1}); };
    ASSERT_THAT(w->Submit(first, {900, 1}), IsOk());
    WaitFinished(second);
    EXPECT_THAT(second_admitted, IsOk()) << "round " << i;
  }
}

TEST_F(EngineWorkerTest, RefusalsReportBytesUnderAMiB) {
  EngineOptions o;
  o.memory_budget_bytes = 1 << 20;
  auto w = Start(o);
  // More than the whole budget can ever hold: a permanent refusal, not a
  // 429 to retry (issue #34 R7).
  EXPECT_THAT(w->Submit(Job("big", 1), {(1 << 20) + 1, 1}),
              StatusIs(absl::StatusCode::kFailedPrecondition, "can ever hold"));
  EXPECT_THAT(w->OpenSession({(1 << 20) + 1, 1}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "--memory-budget-mb"));
  auto held = Job("held", 1);
  held->hold = true;
  ASSERT_THAT(w->Submit(held, {1000000, 1}), IsOk());
  EXPECT_THAT(w->Submit(Job("small", 1), {100000, 1}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "needs 100000 bytes of activations and logits, 48576 bytes of the 1 MiB "
                       "budget are free"));
  held->hold = false;
  WaitFinished(held);
}

TEST_F(EngineWorkerTest, QueueCapIsResourceExhausted) {
  EngineOptions o;
  o.max_running = 1;
  o.max_queue = 1;
  auto w = Start(o);
  auto a = Job("a", 1), b = Job("b", 1), c = Job("c", 1);
  a->hold = true;
  ASSERT_THAT(w->Submit(a, {0, 1}), IsOk());
  ASSERT_THAT(w->Submit(b, {0, 1}), IsOk());
  EXPECT_THAT(w->Submit(c, {0, 1}), StatusIs(absl::StatusCode::kResourceExhausted, "max_queue 1"));
  a->hold = false;
  WaitFinished(a);
  WaitFinished(b);
  EXPECT_THAT(a->finish_status, IsOk());
  EXPECT_THAT(b->finish_status, IsOk());
  EXPECT_TRUE(w->WaitIdle(std::chrono::seconds(5)));
  EXPECT_EQ(w->load().running, 0);
}

TEST_F(EngineWorkerTest, MemoryBudgetIsReservedAtAdmission) {
  EngineOptions o;
  o.max_running = 2;
  o.memory_budget_bytes = 1000;
  auto w = Start(o);
  auto a = Job("a", 1), b = Job("b", 1), c = Job("c", 1);
  a->hold = true;
  ASSERT_THAT(w->Submit(a, {600, 1}), IsOk());
  EXPECT_EQ(w->load().reserved_bytes, 600u);
  EXPECT_THAT(w->Submit(b, {600, 1}), StatusIs(absl::StatusCode::kResourceExhausted, "memory"));
  EXPECT_THAT(w->Submit(c, {400, 1}), IsOk());
  a->hold = false;
  WaitFinished(a);
  WaitFinished(c);
  EXPECT_TRUE(w->WaitIdle(std::chrono::seconds(5)));
  EXPECT_EQ(w->load().reserved_bytes, 0u);
  EXPECT_THAT(w->Submit(Job("d", 1), {1000, 1}), IsOk());
}

TEST_F(EngineWorkerTest, RunningJobsAdvanceRoundRobin) {
  EngineOptions o;
  o.max_running = 2;
  o.max_batch_requests = 1;  // one job's step a turn (BatchesTakeTheRunningJobsInTurn batches)
  auto w = Start(o);
  auto gate = Job("gate", 1);
  gate->hold = true;
  ASSERT_THAT(w->Submit(gate, {0, 1}), IsOk());
  auto a = Job("a", 3), b = Job("b", 3);
  ASSERT_THAT(w->Submit(a, {0, 1}), IsOk());
  ASSERT_THAT(w->Submit(b, {0, 1}), IsOk());
  gate->hold = false;
  WaitFinished(a);
  WaitFinished(b);
  std::lock_guard<std::mutex> lock(mu_);
  // Both start once the gate's step ends, then alternate step by step.
  EXPECT_EQ(log_, (std::vector<std::string>{"gate", "a", "b", "a", "b", "a", "b"}));
}

TEST_F(EngineWorkerTest, QueuedDeadlineAndCancelNeverRun) {
  EngineOptions o;
  o.max_running = 1;
  o.max_queue = 4;
  auto w = Start(o);
  auto a = Job("a", 1), late = Job("late", 1), gone = Job("gone", 1);
  a->hold = true;
  ASSERT_THAT(w->Submit(a, {0, 1}), IsOk());
  late->set_deadline(EngineClock::now() + std::chrono::milliseconds(20));
  ASSERT_THAT(w->Submit(late, {0, 1}), IsOk());
  ASSERT_THAT(w->Submit(gone, {0, 1}), IsOk());
  gone->Cancel();
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  // Both end during a's step (its between-layer poll), not after it.
  WaitFinished(gone);
  WaitFinished(late);
  EXPECT_FALSE(Finished(a));
  a->hold = false;
  WaitFinished(a);
  EXPECT_THAT(gone->finish_status, StatusIs(absl::StatusCode::kCancelled, ""));
  EXPECT_THAT(late->finish_status, StatusIs(absl::StatusCode::kDeadlineExceeded, "queued"));
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(log_, std::vector<std::string>{"a"});
}

TEST_F(EngineWorkerTest, CancelStopsARunningJobAndMeasuresLatency) {
  auto w = Start({});
  auto a = Job("a", 1000);
  a->hold = true;
  ASSERT_THAT(w->Submit(a, {0, 1}), IsOk());
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return w->load().running > 0; }));
  a->Cancel();
  WaitFinished(a);
  EXPECT_THAT(a->finish_status, StatusIs(absl::StatusCode::kCancelled, ""));
  EXPECT_GE(w->last_cancel_latency_seconds(), 0.0);
  EXPECT_TRUE(w->WaitIdle(std::chrono::seconds(5)));
}

TEST_F(EngineWorkerTest, SessionsHaveTheirOwnCapAndRunWorkItems) {
  EngineOptions o;
  o.max_sessions = 1;
  o.memory_budget_bytes = 100;
  auto w = Start(o);
  auto lease = w->OpenSession({60, 1});
  ASSERT_THAT(lease.status(), IsOk());
  EXPECT_EQ(w->load().sessions_open, 1);
  EXPECT_THAT(w->OpenSession({10, 1}).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, "max_sessions 1"));
  EXPECT_THAT(w->Submit(Job("big", 1), {50, 1}),
              StatusIs(absl::StatusCode::kResourceExhausted, "memory"));
  std::thread::id engine_thread;
  std::atomic<bool> done{false};
  ASSERT_THAT(w->Post([&] { engine_thread = std::this_thread::get_id(); },
                      [&](const absl::Status& s) {
                        EXPECT_THAT(s, IsOk());
                        done = true;
                      }),
              IsOk());
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return done.load(); }));
  EXPECT_NE(engine_thread, std::this_thread::get_id());
  lease->reset();
  EXPECT_EQ(w->load().sessions_open, 0);
  EXPECT_EQ(w->load().reserved_bytes, 0u);
  EXPECT_THAT(w->OpenSession({100, 1}).status(), IsOk());
}

// Each turn runs the next step of as many running jobs as the batch takes,
// in round-robin order; a job that did not fit goes first next turn, so
// none waits more than one turn while another runs twice.
TEST_F(EngineWorkerTest, BatchesTakeTheRunningJobsInTurn) {
  EngineOptions o;
  o.max_running = 4;
  o.max_batch_requests = 2;
  auto w = Start(o);
  auto gate = Job("gate", 1);
  gate->hold = true;
  ASSERT_THAT(w->Submit(gate, {0, 1}), IsOk());
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return w->load().running == 1; }));
  std::vector<std::shared_ptr<PlannedJob>> jobs;
  for (const char* name : {"a", "b", "c"}) {
    jobs.push_back(std::make_shared<PlannedJob>(name, 3, &log_, &mu_));
    ASSERT_THAT(w->Submit(jobs.back(), {0, 1}), IsOk());
  }
  gate->hold = false;
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs[0]->finished && jobs[1]->finished && jobs[2]->finished;
  }));
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(log_, (std::vector<std::string>{"gate", "plan:a", "plan:b", "a", "b", "plan:c",
                                            "plan:a", "c", "a", "plan:b", "plan:c", "b", "c",
                                            "plan:a", "plan:b", "a", "b", "plan:c", "c"}));
  for (const auto& j : jobs) EXPECT_THAT(j->finish_status, IsOk());
}

// A request whose one step needs more rows than a forward takes is refused
// at admission, naming the flag.
TEST_F(EngineWorkerTest, RequestsLargerThanTheBatchAreRefused) {
  EngineOptions o;
  o.max_batch_rows = 100;
  auto w = Start(o);
  EXPECT_THAT(w->Submit(Job("big", 1), {0, 101}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--max-batch-rows"));
  EXPECT_THAT(w->OpenSession({0, 101}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "--max-batch-rows"));
  EXPECT_THAT(w->Submit(Job("fits", 1), {0, 100}), IsOk());
}

// A row budget that the memory budget lowered is blamed on the memory
// budget, the flag to change (issue #34 R8).
TEST_F(EngineWorkerTest, ARowBudgetSetByTheMemoryBudgetNamesIt) {
  EngineOptions o;
  o.max_batch_rows = 100;
  o.max_batch_rows_from_budget = true;
  auto w = Start(o);
  absl::Status refused = w->Submit(Job("big", 1), {0, 101});
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument, "(--memory-budget-mb)"));
  EXPECT_EQ(std::string(refused.message()).find("--max-batch-rows"), std::string::npos) << refused;
}

TEST_F(EngineWorkerTest, RefusesWorkUntilReady) {
  ThreadPlan plan;
  EngineWorker w(nullptr, plan, {});
  EXPECT_FALSE(w.ready());
  EXPECT_THAT(w.Submit(Job("early", 1), {0, 1}),
              StatusIs(absl::StatusCode::kUnavailable, "warming up"));
  EXPECT_THAT(w.OpenSession({0, 1}).status(),
              StatusIs(absl::StatusCode::kUnavailable, "warming up"));
}

TEST_F(EngineWorkerTest, StopEndsQueuedJobsUnavailable) {
  auto w = Start({});
  auto a = Job("a", 1000), b = Job("b", 1);
  a->hold = true;
  ASSERT_THAT(w->Submit(a, {0, 1}), IsOk());
  ASSERT_THAT(w->Submit(b, {0, 1}), IsOk());
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return w->load().running > 0; }));
  w->Stop();
  EXPECT_TRUE(Finished(a) && Finished(b));
  // Both UNAVAILABLE (clients retry it elsewhere), the running one too.
  EXPECT_THAT(a->finish_status, StatusIs(absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_EQ(b->finish_status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(w->Submit(Job("c", 1), {0, 1}), StatusIs(absl::StatusCode::kUnavailable, ""));
}

TEST(EngineWorkerWarmUpTest, WarmsUpOnTheRealModel) {
  auto model =
      Model::Load(testing::TestDataDir() + "/models/tiny-dream-k-q4_k_m.gguf", {BestIsaLevel()});
  ASSERT_THAT(model.status(), IsOk());
  ThreadPlan plan;
  EngineWorker w(*model, plan, {});
  std::atomic<bool> called{false};
  absl::Status warm;
  w.Start([&](const absl::Status& s) {
    warm = s;
    called = true;
  });
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return called.load(); }));
  EXPECT_THAT(warm, IsOk());
  EXPECT_TRUE(w.ready());
  SamplerConfig c;
  c.gen_length = 64;
  // A request reserves its logits (and caches); the pass is the engine's.
  // Logits are kept for the generated positions only (64), not the prompt
  // (issue #40: a long infill canvas paged in its whole canvas's worth).
  const EngineWorker::Reservation r =
      EngineWorker::ReservationFor((*model)->config(), c, {}, 10 + 64);
  EXPECT_EQ(r.bytes, static_cast<uint64_t>(64) * (*model)->config().n_vocab * 4);
  EXPECT_EQ(r.rows, 74);
  EXPECT_GE(w.load().reserved_bytes,
            ForwardPass::ActivationBytes((*model)->config(),
                                         ForwardLimits{w.options().max_batch_rows, 1, 0}));
}

}  // namespace
}  // namespace dllm
