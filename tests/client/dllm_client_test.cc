// DllmClient and StepSession against a real dllm-server on loopback (tiny
// LLaDA test model), plus the failures that need no server (connection
// refused, unreadable CA file).
#include "client/dllm_client.h"

#include <algorithm>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/server_process.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;
using ::dllm::testing::StatusIs;
using ::testing::HasSubstr;
using Health = grpc::health::v1::HealthCheckResponse;

TEST(DllmClientOfflineTest, RefusedConnectionIsUnavailable) {
  ClientOptions options;
  options.target = "127.0.0.1:1";  // nothing listens on port 1
  auto client = DllmClient::Create(options);
  ASSERT_THAT(client.status(), IsOk());
  EXPECT_THAT((*client)->GetServerInfo().status(), StatusIs(absl::StatusCode::kUnavailable, ""));
  const absl::Status generate =
      (*client)->Generate(v1::GenerateRequest(), [](const v1::GenerateEvent&) { return true; });
  EXPECT_THAT(generate, StatusIs(absl::StatusCode::kUnavailable, ""));
  EXPECT_THAT((*client)->OpenSession(v1::Open()).status(),
              StatusIs(absl::StatusCode::kUnavailable, ""));
}

TEST(DllmClientOfflineTest, MissingCaFileIsNotFound) {
  ClientOptions options;
  options.tls_ca_file = "/nonexistent/ca.pem";
  EXPECT_THAT(DllmClient::Create(options).status(),
              StatusIs(absl::StatusCode::kNotFound, "tls_ca_file"));
}

TEST(DllmClientOfflineTest, RejectsNegativeTimeout) {
  ClientOptions options;
  options.timeout_seconds = -1;
  EXPECT_THAT(DllmClient::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "timeout_seconds"));
}

class DllmClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess();
    start_status_ = new absl::Status(server_->Start());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete start_status_;
    start_status_ = nullptr;
  }
  void SetUp() override {
    ASSERT_THAT(*start_status_, IsOk());
    ClientOptions options;
    options.target = server_->target();
    auto client = DllmClient::Create(options);
    ASSERT_THAT(client.status(), IsOk());
    client_ = *std::move(client);
  }

  // A short greedy LLaDA generation: 32 positions, one block, 32 steps.
  static void FillSmall(v1::DiffusionParams* diffusion, v1::SamplingParams* sampling) {
    diffusion->set_gen_length(32);
    diffusion->set_steps(32);
    diffusion->set_block_length(32);
    sampling->set_seed(7);
  }

  static testing::ServerProcess* server_;
  static absl::Status* start_status_;
  std::unique_ptr<DllmClient> client_;
};

testing::ServerProcess* DllmClientTest::server_ = nullptr;
absl::Status* DllmClientTest::start_status_ = nullptr;

TEST_F(DllmClientTest, ModelAndServerInfo) {
  auto model = client_->GetModelInfo();
  ASSERT_THAT(model.status(), IsOk());
  EXPECT_EQ(model->architecture(), "llada");
  EXPECT_GT(model->vocab_size(), model->mask_token_id());
  auto server = client_->GetServerInfo();
  ASSERT_THAT(server.status(), IsOk());
  EXPECT_GE(server->max_running(), 1u);
  EXPECT_FALSE(server->version().empty());
}

TEST_F(DllmClientTest, HealthLiveAndReady) {
  for (const char* service : {"", "dllm.v1.DiffusionLM"}) {
    auto health = client_->CheckHealth(service);
    ASSERT_THAT(health.status(), IsOk()) << service;
    EXPECT_EQ(*health, Health::SERVING) << service;
  }
  EXPECT_THAT(client_->CheckHealth("no.such.Service").status(),
              StatusIs(absl::StatusCode::kNotFound, ""));
}

TEST_F(DllmClientTest, TokenizeGivesIdsAndPieces) {
  v1::TokenizeRequest request;
  request.set_text("Hello world");
  auto response = client_->Tokenize(request);
  ASSERT_THAT(response.status(), IsOk());
  EXPECT_GT(response->ids_size(), 0);
  EXPECT_EQ(response->pieces_size(), response->ids_size());
}

TEST_F(DllmClientTest, GenerateStreamsDeltasThatAddUpToTheFinalText) {
  v1::GenerateRequest request;
  request.set_request_id("client-test-1");
  request.mutable_prompt()->set_text("The capital of France is");
  FillSmall(request.mutable_diffusion(), request.mutable_sampling());
  std::vector<v1::GenerateEvent> events;
  const absl::Status status = client_->Generate(request, [&](const v1::GenerateEvent& e) {
    events.push_back(e);
    return true;
  });
  ASSERT_THAT(status, IsOk());
  // Progress heartbeats may come first while queued; then Started.
  auto first = std::find_if(events.begin(), events.end(),
                            [](const v1::GenerateEvent& e) { return !e.has_progress(); });
  ASSERT_NE(first, events.end());
  EXPECT_TRUE(first->has_started());
  ASSERT_TRUE(events.back().has_final());
  std::string streamed;
  for (const v1::GenerateEvent& e : events) {
    EXPECT_EQ(e.request_id(), "client-test-1");
    if (e.has_step()) streamed += e.step().text_delta();
  }
  EXPECT_EQ(streamed, events.back().final().text());
  EXPECT_EQ(events.back().final().seed(), 7u);
}

TEST_F(DllmClientTest, InvalidRequestIsInvalidArgumentNamingTheField) {
  v1::GenerateRequest request;
  request.mutable_prompt()->set_text("x");
  request.mutable_diffusion()->set_gen_length(128);
  request.mutable_diffusion()->set_block_length(24);
  const absl::Status status =
      client_->Generate(request, [](const v1::GenerateEvent&) { return true; });
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, "block_length"));
}

TEST_F(DllmClientTest, ReturningFalseCancelsTheStream) {
  v1::GenerateRequest request;
  request.mutable_prompt()->set_text("Count to ten");
  request.mutable_diffusion()->set_gen_length(128);
  request.mutable_stream()->set_detail(v1::DETAIL_STEPS);
  int events = 0;
  const absl::Status status = client_->Generate(request, [&](const v1::GenerateEvent&) {
    ++events;
    return false;
  });
  EXPECT_EQ(events, 1);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled, ""));
}

TEST_F(DllmClientTest, DeadlineExceeded) {
  ClientOptions options;
  options.target = server_->target();
  options.timeout_seconds = 0.001;
  auto client = DllmClient::Create(options);
  ASSERT_THAT(client.status(), IsOk());
  v1::GenerateRequest request;
  request.mutable_prompt()->set_text("Count to ten");
  request.mutable_diffusion()->set_gen_length(256);
  const absl::Status status =
      (*client)->Generate(request, [](const v1::GenerateEvent&) { return true; });
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded, ""));
}

TEST_F(DllmClientTest, StepSessionAdvanceForwardCommitRewindClose) {
  v1::Open open;
  open.set_request_id("session-test");
  open.mutable_prompt()->set_text("Once upon a time");
  FillSmall(open.mutable_diffusion(), open.mutable_sampling());
  auto session = client_->OpenSession(open);
  ASSERT_THAT(session.status(), IsOk());
  StepSession& s = **session;
  EXPECT_EQ(s.request_id(), "session-test");
  EXPECT_FALSE(s.opened().session_id().empty());
  EXPECT_EQ(s.opened().started().gen_length(), 32u);

  v1::Advance advance;
  advance.set_steps(2);
  auto advanced = s.Advance(advance);
  ASSERT_THAT(advanced.status(), IsOk());
  ASSERT_EQ(advanced->size(), 2u);
  EXPECT_EQ(s.step(), 2u);
  EXPECT_EQ((*advanced)[1].step().masked_remaining(), 30u);

  v1::Forward forward;
  forward.set_top_candidates(3);
  auto candidates = s.Forward(forward);
  ASSERT_THAT(candidates.status(), IsOk());
  ASSERT_EQ(candidates->candidates_size(), 30);  // every masked position
  const v1::PositionCandidates& first = candidates->candidates(0);
  ASSERT_EQ(first.candidates_size(), 3);
  EXPECT_EQ(s.step(), 2u);  // nothing committed

  // A bad op fails alone; the session stays usable.
  v1::Commit bad;
  v1::CommittedToken* t = bad.add_tokens();
  t->set_position(9999);
  t->set_token_id(first.candidates(0).token_id());
  EXPECT_THAT(s.Commit(bad).status(), StatusIs(absl::StatusCode::kInvalidArgument, "position"));

  v1::Commit commit;
  t = commit.add_tokens();
  t->set_position(first.position());
  t->set_token_id(first.candidates(0).token_id());
  auto committed = s.Commit(commit);
  ASSERT_THAT(committed.status(), IsOk());
  ASSERT_FALSE(committed->empty());
  EXPECT_EQ(s.step(), 3u);

  auto rewound = s.Rewind(1);
  ASSERT_THAT(rewound.status(), IsOk());
  EXPECT_EQ(rewound->step(), 1u);
  EXPECT_EQ(rewound->masked_remaining(), 31u);
  EXPECT_EQ(s.step(), 1u);

  advance.set_steps(1000);  // runs to the end: Final
  advanced = s.Advance(advance);
  ASSERT_THAT(advanced.status(), IsOk());
  ASSERT_FALSE(advanced->empty());
  EXPECT_TRUE(advanced->back().has_final());
  EXPECT_TRUE(s.finished());
  EXPECT_THAT(s.Close(), IsOk());
  EXPECT_THAT(s.Advance(advance).status(), StatusIs(absl::StatusCode::kFailedPrecondition, ""));
}

TEST_F(DllmClientTest, OpenErrorIsReturned) {
  v1::Open open;
  open.mutable_prompt()->set_text("x");
  open.mutable_diffusion()->set_gen_length(128);
  open.mutable_diffusion()->set_block_length(24);
  const absl::Status status = client_->OpenSession(open).status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, "block_length"));
}

}  // namespace
}  // namespace dllm
