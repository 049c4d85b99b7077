// StepSession's protocol handling (seq matching, when an operation is
// answered, errors that leave the session usable) against an in-process fake
// of the Step RPC, so it runs without dllm-server.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dllm_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/fake_step_service.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;
using ::dllm::testing::StatusIs;

class StepSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<DllmClient>(absl::StrCat("127.0.0.1:", port));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<StepSession> Open() {
    auto session = client_->OpenSession(v1::Open());
    EXPECT_THAT(session.status(), IsOk());
    return session.ok() ? *std::move(session) : nullptr;
  }
  static v1::Advance Steps(uint32_t n) {
    v1::Advance a;
    a.set_steps(n);
    return a;
  }

  testing::FakeStepService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<DllmClient> client_;
};

TEST_F(StepSessionTest, AdvanceReturnsOneEventPerStepThenFinal) {
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->opened().session_id(), "s1");
  EXPECT_EQ(s->request_id(), "fake-request");
  auto r = s->Advance(Steps(2));
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(s->step(), 2u);
  EXPECT_FALSE(s->finished());
  // Asking for more steps than remain: the events that ran, then Final.
  r = s->Advance(Steps(10));
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_TRUE((*r)[2].has_final());
  EXPECT_TRUE(s->finished());
  EXPECT_THAT(s->Close(), IsOk());
}

TEST_F(StepSessionTest, AdvanceToTheLastStepWaitsForFinal) {
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  auto r = s->Advance(Steps(4));
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->size(), 5u);
  EXPECT_TRUE(r->back().has_final());
}

TEST_F(StepSessionTest, ErrorsLeaveTheSessionUsable) {
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  v1::Commit bad;
  bad.add_tokens()->set_position(99);
  EXPECT_THAT(s->Commit(bad).status(), StatusIs(absl::StatusCode::kInvalidArgument, "position"));
  EXPECT_THAT(s->Rewind(5).status(), StatusIs(absl::StatusCode::kInvalidArgument, "to_step"));

  v1::Commit commit;
  v1::CommittedToken* t = commit.add_tokens();
  t->set_position(2);
  t->set_token_id(7);
  auto r = s->Commit(commit);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(s->step(), 1u);

  auto forward = s->Forward(v1::Forward());
  ASSERT_THAT(forward.status(), IsOk());
  EXPECT_EQ(forward->candidates_size(), 3);

  auto rewound = s->Rewind(0);
  ASSERT_THAT(rewound.status(), IsOk());
  EXPECT_EQ(rewound->masked_remaining(), 4u);
  EXPECT_EQ(s->step(), 0u);
  EXPECT_THAT(s->Close(), IsOk());
}

TEST_F(StepSessionTest, AdvanceOnACompleteCanvasFailsAlone) {
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  ASSERT_THAT(s->Advance(Steps(4)).status(), IsOk());
  EXPECT_THAT(s->Advance(Steps(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "complete"));
  auto rewound = s->Rewind(3);
  ASSERT_THAT(rewound.status(), IsOk());
  EXPECT_FALSE(s->finished());
  auto r = s->Advance(Steps(1));
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_TRUE(r->back().has_final());
}

TEST_F(StepSessionTest, CommitThatCompletesTheCanvasWaitsForFinal) {
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  ASSERT_THAT(s->Advance(Steps(3)).status(), IsOk());
  v1::Commit commit;
  v1::CommittedToken* t = commit.add_tokens();
  t->set_position(3);
  t->set_token_id(1);
  auto r = s->Commit(commit);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE((*r)[1].has_final());
  EXPECT_TRUE(s->finished());
}

// An early exit on exactly the last requested step, positions still masked:
// the StepEvent says a Final follows, so the operation returns with it and
// the next command never sees it late (as it once did after its error).
TEST_F(StepSessionTest, EarlyExitFinalComesWithItsOperation) {
  service_.early_exit_step_ = 2;
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  auto r = s->Advance(Steps(2));
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_TRUE(r->back().has_final());
  EXPECT_GT((*r)[1].step().masked_remaining(), 0u);
  EXPECT_TRUE(s->finished());
  EXPECT_THAT(s->Advance(Steps(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "complete"));
}

TEST_F(StepSessionTest, EarlyExitFinalComesWithItsCommit) {
  service_.early_exit_step_ = 1;
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  v1::Commit commit;
  v1::CommittedToken* t = commit.add_tokens();
  t->set_position(0);
  t->set_token_id(7);
  auto r = s->Commit(commit);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE(r->back().has_final());
  EXPECT_TRUE(s->finished());
}

TEST_F(StepSessionTest, ObserverSeesEveryResponse) {
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  int seen = 0;
  s->set_observer([&](const v1::StepResponse&) { ++seen; });
  ASSERT_THAT(s->Advance(Steps(4)).status(), IsOk());
  EXPECT_EQ(seen, 5);
}

TEST_F(StepSessionTest, OperationsAfterCloseFail) {
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  ASSERT_THAT(s->Close(), IsOk());
  EXPECT_THAT(s->Advance(Steps(1)).status(), StatusIs(absl::StatusCode::kFailedPrecondition, ""));
}

TEST_F(StepSessionTest, DestroyingAnOpenSessionDoesNotBlock) {
  std::unique_ptr<StepSession> s = Open();
  ASSERT_NE(s, nullptr);
  ASSERT_THAT(s->Advance(Steps(1)).status(), IsOk());
  s.reset();  // cancels the call
}

}  // namespace
}  // namespace dllm
