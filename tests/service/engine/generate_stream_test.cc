// GenerateMailbox without gRPC: one write in flight, step events merged
// while the client is slow, Final never dropped, heartbeats when idle.
#include "service/engine/generate_stream.h"

#include <vector>

#include "gtest/gtest.h"

namespace dllm {
namespace {

// Records what the mailbox asks for; writes complete when the test says so.
class FakeSink : public EventSink {
 public:
  void Write(const v1::GenerateEvent* event) override {
    EXPECT_FALSE(in_flight);
    in_flight = true;
    written.push_back(*event);
  }
  void Close(const absl::Status& status) override {
    EXPECT_FALSE(in_flight);
    EXPECT_FALSE(closed);
    closed = true;
    close_status = status;
  }
  void Complete(GenerateMailbox& m, bool ok = true) {
    ASSERT_TRUE(in_flight);
    in_flight = false;
    m.OnWriteDone(ok);
  }

  std::vector<v1::GenerateEvent> written;
  bool in_flight = false;
  bool closed = false;
  absl::Status close_status;
};

v1::StepEvent Step(int step, int position, const std::string& delta, int canvas_token) {
  v1::StepEvent e;
  e.set_step(step);
  e.set_merged_steps(1);
  e.set_stable_length(position + 1);
  e.set_text_delta(delta);
  v1::CommittedToken* t = e.add_committed();
  t->set_position(position);
  t->set_token_id(100 + position);
  e.add_canvas(canvas_token);
  e.mutable_timings()->set_step_seconds(0.5);
  return e;
}

TEST(GenerateMailboxTest, CoalescesStepsWhileAWriteIsInFlight) {
  FakeSink sink;
  GenerateMailbox m("req-1", 10, &sink);
  m.PostStarted(v1::Started());
  ASSERT_EQ(sink.written.size(), 1u);
  EXPECT_TRUE(sink.written[0].has_started());
  EXPECT_EQ(sink.written[0].request_id(), "req-1");
  m.PostStep(Step(1, 0, "He", 7));
  m.PostStep(Step(2, 1, "llo", 8));
  m.PostStep(Step(3, 2, "!", 9));
  EXPECT_EQ(sink.written.size(), 1u);
  EXPECT_EQ(m.events_coalesced(), 2);
  sink.Complete(m);
  ASSERT_EQ(sink.written.size(), 2u);
  const v1::StepEvent& merged = sink.written[1].step();
  EXPECT_EQ(merged.step(), 3u);
  EXPECT_EQ(merged.merged_steps(), 3u);
  EXPECT_EQ(merged.text_delta(), "Hello!");
  EXPECT_EQ(merged.stable_length(), 3u);
  ASSERT_EQ(merged.committed_size(), 3);
  EXPECT_EQ(merged.committed(2).position(), 2u);
  ASSERT_EQ(merged.canvas_size(), 1);
  EXPECT_EQ(merged.canvas(0), 9u);
  EXPECT_DOUBLE_EQ(merged.timings().step_seconds(), 1.5);

  v1::Final final;
  final.set_text("Hello!");
  m.PostFinal(final);
  m.PostStep(Step(4, 3, "late", 1));  // after Final: ignored
  sink.Complete(m);
  ASSERT_EQ(sink.written.size(), 3u);
  EXPECT_TRUE(sink.written[2].has_final());
  EXPECT_FALSE(sink.closed);
  sink.Complete(m);
  EXPECT_TRUE(sink.closed);
  EXPECT_TRUE(sink.close_status.ok());
  EXPECT_EQ(m.events_sent(), 3);
}

TEST(GenerateMailboxTest, FinalIsNeverMergedAway) {
  FakeSink sink;
  GenerateMailbox m("r", 10, &sink);
  m.PostStarted(v1::Started());
  m.PostStep(Step(1, 0, "a", 1));
  m.PostFinal(v1::Final());
  sink.Complete(m);
  sink.Complete(m);
  sink.Complete(m);
  ASSERT_EQ(sink.written.size(), 3u);
  EXPECT_TRUE(sink.written[1].has_step());
  EXPECT_TRUE(sink.written[2].has_final());
  EXPECT_TRUE(sink.closed);
}

TEST(GenerateMailboxTest, FailDropsWaitingEventsAndClosesAfterTheWriteInFlight) {
  FakeSink sink;
  GenerateMailbox m("r", 10, &sink);
  m.PostStarted(v1::Started());
  m.PostStep(Step(1, 0, "a", 1));
  m.Fail(absl::CancelledError("cancelled"));
  EXPECT_FALSE(sink.closed);
  sink.Complete(m);
  EXPECT_EQ(sink.written.size(), 1u);
  EXPECT_TRUE(sink.closed);
  EXPECT_EQ(sink.close_status.code(), absl::StatusCode::kCancelled);
}

TEST(GenerateMailboxTest, BrokenWriteClosesTheCall) {
  FakeSink sink;
  GenerateMailbox m("r", 10, &sink);
  m.PostStarted(v1::Started());
  m.PostStep(Step(1, 0, "a", 1));
  sink.Complete(m, /*ok=*/false);
  EXPECT_TRUE(sink.closed);
  EXPECT_EQ(sink.written.size(), 1u);
  m.Fail(absl::CancelledError("late"));  // no second close
}

TEST(GenerateMailboxTest, HeartbeatWhenIdle) {
  FakeSink sink;
  GenerateMailbox m("r", 1, &sink);
  const auto now = GenerateMailbox::Clock::now();
  m.SetProgress(3, 10, 7);
  EXPECT_TRUE(m.MaybeHeartbeat(now));
  EXPECT_TRUE(sink.written.empty());
  EXPECT_TRUE(m.MaybeHeartbeat(now + std::chrono::seconds(2)));
  ASSERT_EQ(sink.written.size(), 1u);
  ASSERT_TRUE(sink.written[0].has_progress());
  EXPECT_EQ(sink.written[0].progress().step(), 3u);
  EXPECT_EQ(sink.written[0].progress().masked_remaining(), 7u);
  // A waiting Progress gives way to a step event.
  EXPECT_TRUE(m.MaybeHeartbeat(now + std::chrono::seconds(4)));  // write in flight: nothing
  sink.Complete(m);
  m.PostFinal(v1::Final());
  sink.Complete(m);
  EXPECT_TRUE(sink.closed);
  m.Detach();
  EXPECT_FALSE(m.MaybeHeartbeat(now + std::chrono::seconds(10)));
}

}  // namespace
}  // namespace dllm
