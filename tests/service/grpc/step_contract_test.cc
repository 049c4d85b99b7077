// Contract tests of the Step RPC (client-driven sessions) against a real
// server on loopback, through the generated stub: a full session (open,
// forward, commit, advance, rewind, advance again reproduces the
// uninterrupted run), every op error in-band with the session alive, idle
// timeout, the session limit, client cancellation and drain.
#include <grpcpp/grpcpp.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <functional>
#include <sstream>
#include <thread>

#include "dllm/v1/dllm.grpc.pb.h"
#include "engine/session/denoise_session.h"
#include "gtest/gtest.h"
#include "service/grpc/proto_request.h"
#include "service/grpc/server.h"
#include "service/metrics/service_metrics.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/test_server.h"

namespace dllm {
namespace {

constexpr const char* kLlada = "tiny-llada-k-q4_k_m.gguf";

using ::dllm::testing::StartTestServer;
using ::dllm::testing::TestModelPath;

// A seeded, sampled LLaDA session in two blocks, without early exit (so the
// canvas is complete exactly when nothing is masked).
v1::Open OpenOp() {
  v1::Open open;
  open.set_request_id("step-test");
  open.mutable_prompt()->set_text("Once upon a time");
  open.mutable_diffusion()->set_gen_length(32);
  open.mutable_diffusion()->set_steps(16);
  open.mutable_diffusion()->set_block_length(16);
  open.mutable_diffusion()->set_early_exit(false);
  open.mutable_sampling()->set_temperature(0.7f);
  open.mutable_sampling()->set_seed(42);
  return open;
}

bool Terminal(const v1::StepResponse& r) {
  return r.has_error() || r.has_final() || r.has_opened() || r.has_forward() || r.has_rewound() ||
         r.has_closed();
}

// One Step call driven op by op.
class Session {
 public:
  explicit Session(v1::DiffusionLM::Stub& stub) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    stream_ = stub.Step(&ctx_);
  }

  // Sends `request` with the next seq and reads its responses: up to a
  // terminal one, or `steps` StepEvents when the canvas is not complete
  // (a step with final_follows is followed by Final). Fewer when the stream ends.
  std::vector<v1::StepResponse> Run(v1::StepRequest request, int64_t steps = 1) {
    request.set_seq(++seq_);
    std::vector<v1::StepResponse> out;
    if (!stream_->Write(request)) return out;
    v1::StepResponse r;
    int64_t seen = 0;
    while (stream_->Read(&r)) {
      EXPECT_EQ(r.seq(), seq_);
      // Final comes right after the StepEvent that announces it, and only then.
      if (r.has_final()) {
        EXPECT_TRUE(!out.empty() && out.back().has_step() && out.back().step().final_follows());
      }
      if (!out.empty() && out.back().has_step() && out.back().step().final_follows()) {
        EXPECT_TRUE(r.has_final());
      }
      out.push_back(r);
      if (observer_) observer_(r);
      if (Terminal(r)) break;
      if (r.has_step() && ++seen >= steps && !r.step().final_follows()) break;
    }
    return out;
  }
  v1::StepResponse One(v1::StepRequest request) {
    std::vector<v1::StepResponse> out = Run(std::move(request));
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? v1::StepResponse() : out.back();
  }

  v1::StepResponse Open(const v1::Open& open) {
    v1::StepRequest r;
    *r.mutable_open() = open;
    return One(r);
  }
  std::vector<v1::StepResponse> Advance(uint32_t steps, bool canvas = false, int top = 0) {
    v1::StepRequest r;
    r.mutable_advance()->set_steps(steps);
    r.mutable_advance()->set_include_canvas(canvas);
    r.mutable_advance()->set_top_candidates(top);
    return Run(r, steps);
  }
  v1::StepResponse Forward(int k, std::vector<uint32_t> positions = {}) {
    v1::StepRequest r;
    r.mutable_forward()->set_top_candidates(k);
    for (uint32_t p : positions) r.mutable_forward()->add_positions(p);
    return One(r);
  }
  std::vector<v1::StepResponse> Commit(std::vector<std::pair<uint32_t, uint32_t>> tokens) {
    v1::StepRequest r;
    for (const auto& [p, id] : tokens) {
      v1::CommittedToken* t = r.mutable_commit()->add_tokens();
      t->set_position(p);
      t->set_token_id(id);
    }
    return Run(r);
  }
  v1::StepResponse Rewind(uint32_t to) {
    v1::StepRequest r;
    r.mutable_rewind()->set_to_step(to);
    return One(r);
  }
  // Close, then the call's status.
  grpc::Status Close() {
    v1::StepRequest r;
    r.mutable_close();
    const v1::StepResponse closed = One(r);
    EXPECT_TRUE(closed.has_closed()) << closed.DebugString();
    return End();
  }
  // Reads until the server ends the call (without half-closing, which
  // would end the session with OK); its status.
  grpc::Status End() {
    v1::StepResponse r;
    while (stream_->Read(&r)) ADD_FAILURE() << "unexpected " << r.DebugString();
    return stream_->Finish();
  }
  grpc::Status WritesDoneAndEnd() {
    stream_->WritesDone();
    return End();
  }
  grpc::ClientContext& context() { return ctx_; }
  // Called with each response as it is read.
  void set_observer(std::function<void(const v1::StepResponse&)> f) { observer_ = std::move(f); }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::StepRequest, v1::StepResponse>> stream_;
  uint64_t seq_ = 0;
  std::function<void(const v1::StepResponse&)> observer_;
};

void ExpectOpError(const v1::StepResponse& r, grpc::StatusCode code) {
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_EQ(r.error().code(), static_cast<int>(code)) << r.error().message();
  EXPECT_FALSE(r.error().message().empty());
}

struct RunResult {
  std::vector<uint32_t> canvas;  // after the last step
  v1::Final final;
  std::string deltas;
  int steps = 0;
};

// Advances to the end in one op and checks its shape; `text_before` is the
// text the session's earlier StepEvents (since Open or Rewound) carried.
RunResult AdvanceToEnd(Session& s, uint32_t first_step, const std::string& text_before = "") {
  RunResult out;
  out.deltas = text_before;
  const std::vector<v1::StepResponse> rs = s.Advance(1000, /*canvas=*/true);
  EXPECT_FALSE(rs.empty());
  if (rs.empty()) return out;
  uint32_t step = first_step;
  for (size_t i = 0; i + 1 < rs.size(); ++i) {
    EXPECT_TRUE(rs[i].has_step()) << rs[i].DebugString();
    EXPECT_EQ(rs[i].step().step(), ++step);
    out.deltas += rs[i].step().text_delta();
    out.canvas.assign(rs[i].step().canvas().begin(), rs[i].step().canvas().end());
    ++out.steps;
  }
  EXPECT_TRUE(rs.back().has_final()) << rs.back().DebugString();
  out.final = rs.back().final();
  EXPECT_EQ(out.deltas, out.final.text());
  return out;
}

class StepContractTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = Model::Load(TestModelPath(kLlada), {BestIsaLevel()});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = new std::shared_ptr<const Model>(*model);
    EngineOptions engine;
    engine.max_sessions = 2;
    server_ = StartTestServer(*model_, kLlada, {.engine = engine}).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    WaitSessionsClosed(*server_);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::DiffusionLM::NewStub(channel_);
  }
  // Sessions of earlier tests free their slots after their calls end.
  static void WaitSessionsClosed(DllmServer& server) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (server.worker().load().sessions_open > 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(server.worker().load().sessions_open, 0);
  }

  static std::shared_ptr<const Model>* model_;
  static DllmServer* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DiffusionLM::Stub> stub_;
};
std::shared_ptr<const Model>* StepContractTest::model_;
DllmServer* StepContractTest::server_;

// A DiffusionGemma Step session runs its entropy-bound sampler: advanced
// step by step it ends with Generate's answer for the seed, each step's
// event showing the canvas; the ops that choose, score or replay committed
// positions answer FAILED_PRECONDITION in-band, and the session goes on.
TEST(DiffusionGemmaStepTest, AdvancesCanvasByCanvasAsGenerateDoes) {
  constexpr const char* kGemma = "../logits-dg/tiny-diffusion-gemma-q8_0.gguf";
  auto model = Model::Load(TestModelPath(kGemma), {BestIsaLevel()});
  ASSERT_TRUE(model.ok()) << model.status();
  const int canvas = (*model)->config().canvas_length;
  auto server = StartTestServer(*model, kGemma);
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server->port()), grpc::InsecureChannelCredentials()));
  v1::Open open;
  open.mutable_prompt()->set_text("Hello there");
  open.mutable_diffusion()->set_gen_length(2 * canvas);
  open.mutable_sampling()->set_seed(3);

  // Generate's answer for the same request.
  v1::GenerateRequest generate;
  *generate.mutable_prompt() = open.prompt();
  *generate.mutable_diffusion() = open.diffusion();
  *generate.mutable_sampling() = open.sampling();
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, generate);
  v1::GenerateEvent event;
  v1::Final expected;
  while (reader->Read(&event)) {
    if (event.has_final()) expected = event.final();
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_GT(expected.usage().steps(), 0u);

  Session s(*stub);
  const v1::StepResponse opened = s.Open(open);
  ASSERT_TRUE(opened.has_opened()) << opened.DebugString();
  EXPECT_EQ(opened.opened().started().sampler(), v1::SAMPLER_ENTROPY_BOUND);
  // A few steps one at a time, then the rest in one op.
  for (int i = 0; i < 3; ++i) {
    const std::vector<v1::StepResponse> rs = s.Advance(1, /*canvas=*/true);
    ASSERT_EQ(rs.size(), 1u);
    ASSERT_TRUE(rs[0].has_step()) << rs[0].DebugString();
    EXPECT_EQ(rs[0].step().committed_size(), canvas);
    EXPECT_EQ(rs[0].step().canvas_size(), canvas);
    EXPECT_EQ(rs[0].step().canvas_step().argmax_size(), canvas);
  }
  ExpectOpError(s.Forward(3), grpc::FAILED_PRECONDITION);
  ExpectOpError(s.Commit({{0, 5}}).back(), grpc::FAILED_PRECONDITION);
  ExpectOpError(s.Rewind(1), grpc::FAILED_PRECONDITION);
  const RunResult rest = AdvanceToEnd(s, 3);
  EXPECT_EQ(rest.steps + 3, static_cast<int>(expected.usage().steps()));
  EXPECT_EQ(std::vector<uint32_t>(rest.final.token_ids().begin(), rest.final.token_ids().end()),
            std::vector<uint32_t>(expected.token_ids().begin(), expected.token_ids().end()));
  EXPECT_EQ(rest.final.text(), expected.text());
  EXPECT_TRUE(s.Close().ok());
}

// A LLaDA2.1 session (editing on): steps one at a time give Generate's
// answer; a rewind into the middle replays the edits and the block cache
// (encoded again from the start) to the same end; candidates and a
// client's commit into the current block work as for the other families.
TEST(Llada2StepTest, StepsAndRewindsReproduceGenerate) {
  constexpr const char* kLlada2 = "../llada2/tiny-llada2-q8_0.gguf";
  auto model = Model::Load(TestModelPath(kLlada2), {BestIsaLevel()});
  ASSERT_TRUE(model.ok()) << model.status();
  auto server = StartTestServer(*model, kLlada2);
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server->port()), grpc::InsecureChannelCredentials()));
  v1::Open open;
  open.mutable_prompt()->set_text("def f(x):\n");
  open.mutable_diffusion()->set_gen_length(40);
  open.mutable_diffusion()->set_threshold(0.7f);
  open.mutable_diffusion()->mutable_llada2()->set_editing_threshold(0.5f);
  open.mutable_diffusion()->mutable_llada2()->set_max_post_steps(3);

  v1::GenerateRequest generate;
  *generate.mutable_prompt() = open.prompt();
  *generate.mutable_diffusion() = open.diffusion();
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, generate);
  v1::GenerateEvent event;
  v1::Final expected;
  while (reader->Read(&event)) {
    if (event.has_final()) expected = event.final();
  }
  ASSERT_TRUE(reader->Finish().ok());
  const int total = static_cast<int>(expected.usage().steps());
  ASSERT_GT(total, 10);

  Session s(*stub);
  const v1::StepResponse opened = s.Open(open);
  ASSERT_TRUE(opened.has_opened()) << opened.DebugString();
  EXPECT_EQ(opened.opened().started().llada2().editing_threshold(), 0.5f);
  int edits = 0;
  for (int i = 0; i < 10; ++i) {
    const std::vector<v1::StepResponse> rs = s.Advance(1, /*canvas=*/true);
    ASSERT_EQ(rs.size(), 1u);
    ASSERT_TRUE(rs[0].has_step()) << rs[0].DebugString();
    for (const v1::CommittedToken& t : rs[0].step().committed()) {
      edits += t.has_replaced_token_id() ? 1 : 0;
    }
  }
  EXPECT_GT(edits, 0) << "no edit in the first ten steps";
  const v1::StepResponse mid = s.Rewind(4);
  ASSERT_TRUE(mid.has_rewound()) << mid.DebugString();
  EXPECT_EQ(mid.rewound().step(), 4u);
  const RunResult tail = AdvanceToEnd(s, 4);
  EXPECT_EQ(tail.steps + 4, total);
  EXPECT_EQ(std::vector<uint32_t>(tail.final.token_ids().begin(), tail.final.token_ids().end()),
            std::vector<uint32_t>(expected.token_ids().begin(), expected.token_ids().end()));
  EXPECT_EQ(tail.final.text(), expected.text());

  // Back to the start: candidates for the first block's masked positions,
  // then a client's token there, then the sampler carries on.
  ASSERT_TRUE(s.Rewind(0).has_rewound());
  const v1::StepResponse fwd = s.Forward(2, {3});
  ASSERT_TRUE(fwd.has_forward()) << fwd.DebugString();
  ASSERT_EQ(fwd.forward().candidates_size(), 1);
  const uint32_t choice = fwd.forward().candidates(0).candidates(1).token_id();
  const std::vector<v1::StepResponse> committed = s.Commit({{3, choice}});
  ASSERT_TRUE(committed.back().has_step()) << committed.back().DebugString();
  const RunResult after = AdvanceToEnd(s, 1);
  EXPECT_GT(after.steps, 0);
  EXPECT_TRUE(s.Close().ok());
}

TEST_F(StepContractTest, FullSessionRewindReproducesTheUninterruptedRun) {
  // The same generation straight through DenoiseSession.
  auto spec = ValidateOpen(OpenOp(), **model_, TestModelPath(kLlada));
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<int32_t> reference;
  tbb::task_arena arena(1);
  arena.execute([&] {
    auto session = DenoiseSession::Create(*model_, spec->sampler, spec->prompt);
    ASSERT_TRUE(session.ok()) << session.status();
    while (!(*session)->done()) ASSERT_TRUE((*session)->Advance().ok());
    const auto out = (*session)->OutputTokens();
    reference.assign(out.begin(), out.end());
  });

  // Uninterrupted.
  RunResult straight;
  {
    Session s(*stub_);
    const v1::StepResponse opened = s.Open(OpenOp());
    ASSERT_TRUE(opened.has_opened()) << opened.DebugString();
    straight = AdvanceToEnd(s, 0);
    EXPECT_EQ(straight.steps, 16);
    EXPECT_EQ(straight.canvas.size(), 32u);
    EXPECT_EQ(
        std::vector<int32_t>(straight.final.token_ids().begin(), straight.final.token_ids().end()),
        reference);
    EXPECT_TRUE(s.Close().ok());
  }

  Session s(*stub_);
  const v1::StepResponse opened = s.Open(OpenOp());
  ASSERT_TRUE(opened.has_opened()) << opened.DebugString();
  EXPECT_EQ(opened.request_id(), "step-test");
  EXPECT_FALSE(opened.opened().session_id().empty());
  const v1::Started& started = opened.opened().started();
  EXPECT_EQ(started.gen_length(), 32u);
  EXPECT_EQ(started.block_length(), 16u);
  EXPECT_EQ(started.planned_steps(), 16u);
  EXPECT_EQ(started.seed(), 42u);
  const uint32_t mask = started.mask_token_id();

  // Forward: candidates for every masked position, nothing committed.
  const v1::StepResponse fwd = s.Forward(3);
  ASSERT_TRUE(fwd.has_forward()) << fwd.DebugString();
  EXPECT_EQ(fwd.request_id(), "step-test");
  EXPECT_EQ(fwd.forward().step(), 0u);
  ASSERT_EQ(fwd.forward().candidates_size(), 32);
  for (int i = 0; i < 32; ++i) {
    const v1::PositionCandidates& pc = fwd.forward().candidates(i);
    EXPECT_EQ(pc.position(), static_cast<uint32_t>(i));
    ASSERT_EQ(pc.candidates_size(), 3);
    EXPECT_GE(pc.candidates(0).prob(), pc.candidates(1).prob());
    EXPECT_GE(pc.candidates(1).prob(), pc.candidates(2).prob());
  }
  const v1::StepResponse fwd_default = s.Forward(0, {5, 1});
  ASSERT_TRUE(fwd_default.has_forward()) << fwd_default.DebugString();
  ASSERT_EQ(fwd_default.forward().candidates_size(), 2);
  EXPECT_EQ(fwd_default.forward().candidates(0).position(), 5u);
  EXPECT_EQ(fwd_default.forward().candidates(0).candidates_size(), 5);

  // Commit the client's choice at position 5: one history entry.
  const uint32_t choice = fwd.forward().candidates(5).candidates(1).token_id();
  const std::vector<v1::StepResponse> committed = s.Commit({{5, choice}});
  ASSERT_EQ(committed.size(), 1u);
  ASSERT_TRUE(committed[0].has_step()) << committed[0].DebugString();
  EXPECT_EQ(committed[0].step().step(), 1u);
  EXPECT_EQ(committed[0].step().masked_remaining(), 31u);
  ASSERT_EQ(committed[0].step().committed_size(), 1);
  EXPECT_EQ(committed[0].step().committed(0).position(), 5u);
  EXPECT_EQ(committed[0].step().committed(0).token_id(), choice);

  // Three sampler steps on top, with candidates and the canvas.
  const std::vector<v1::StepResponse> advanced = s.Advance(3, /*canvas=*/true, /*top=*/2);
  ASSERT_EQ(advanced.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const v1::StepEvent& e = advanced[i].step();
    EXPECT_EQ(e.step(), static_cast<uint32_t>(2 + i));
    EXPECT_EQ(e.canvas_size(), 32);
    EXPECT_EQ(e.canvas(5), choice);
    EXPECT_GT(e.committed_size(), 0);
    EXPECT_EQ(e.candidates_size(), e.committed_size());
    for (const auto& c : e.committed()) EXPECT_NE(e.canvas(c.position()), mask);
  }

  // Back to the start (the client's commit undone), then to the end: the
  // same canvas as the uninterrupted run, and text that starts over.
  const v1::StepResponse rewound = s.Rewind(0);
  ASSERT_TRUE(rewound.has_rewound()) << rewound.DebugString();
  EXPECT_EQ(rewound.rewound().step(), 0u);
  EXPECT_EQ(rewound.rewound().masked_remaining(), 32u);
  const RunResult again = AdvanceToEnd(s, 0);
  EXPECT_EQ(again.canvas, straight.canvas);
  EXPECT_EQ(again.final.token_ids_size(), straight.final.token_ids_size());
  EXPECT_EQ(again.final.text(), straight.final.text());

  // Rewind into the middle and finish again: still the same run.
  const v1::StepResponse mid = s.Rewind(7);
  ASSERT_TRUE(mid.has_rewound()) << mid.DebugString();
  EXPECT_EQ(mid.rewound().step(), 7u);
  const RunResult tail = AdvanceToEnd(s, 7);
  EXPECT_EQ(tail.steps, 9);
  EXPECT_EQ(tail.canvas, straight.canvas);
  EXPECT_EQ(tail.final.text(), straight.final.text());

  EXPECT_TRUE(s.Close().ok());
}

// Two sessions advancing at once share the engine's forwards (their steps
// are batched), and each ends with the tokens it gets alone.
TEST_F(StepContractTest, SessionsAdvancingTogetherEachGetTheirOwnRun) {
  std::vector<v1::Open> opens = {OpenOp(), OpenOp()};
  opens[1].mutable_sampling()->set_seed(7);
  opens[1].mutable_prompt()->set_text("A much longer prompt than the other session's, to differ");
  std::vector<std::vector<int32_t>> reference(2);
  tbb::task_arena arena(1);
  for (size_t i = 0; i < 2; ++i) {
    auto spec = ValidateOpen(opens[i], **model_, TestModelPath(kLlada));
    ASSERT_TRUE(spec.ok()) << spec.status();
    arena.execute([&] {
      auto session = DenoiseSession::Create(*model_, spec->sampler, spec->prompt);
      ASSERT_TRUE(session.ok()) << session.status();
      while (!(*session)->done()) ASSERT_TRUE((*session)->Advance().ok());
      const auto out = (*session)->OutputTokens();
      reference[i].assign(out.begin(), out.end());
    });
  }
  ASSERT_NE(reference[0], reference[1]);
  std::vector<RunResult> results(2);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      Session s(*stub_);
      const v1::StepResponse opened = s.Open(opens[i]);
      ASSERT_TRUE(opened.has_opened()) << opened.DebugString();
      results[i] = AdvanceToEnd(s, 0);
      EXPECT_TRUE(s.Close().ok());
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(std::vector<int32_t>(results[i].final.token_ids().begin(),
                                   results[i].final.token_ids().end()),
              reference[i])
        << "session " << i;
  }
}

TEST_F(StepContractTest, OpErrorsKeepTheSessionAlive) {
  Session s(*stub_);
  v1::StepRequest advance;
  advance.mutable_advance()->set_steps(1);
  ExpectOpError(s.One(advance), grpc::FAILED_PRECONDITION);  // before Open
  ExpectOpError(s.Rewind(0), grpc::FAILED_PRECONDITION);
  ExpectOpError(s.One(v1::StepRequest()), grpc::INVALID_ARGUMENT);  // no op

  v1::Open bad = OpenOp();
  bad.mutable_diffusion()->set_block_length(24);
  const v1::StepResponse refused = s.Open(bad);
  ExpectOpError(refused, grpc::INVALID_ARGUMENT);
  EXPECT_NE(refused.error().message().find("block_length"), std::string::npos);

  ASSERT_TRUE(s.Open(OpenOp()).has_opened());
  ExpectOpError(s.Open(OpenOp()), grpc::FAILED_PRECONDITION);  // second Open
  ExpectOpError(s.Forward(3, {99}), grpc::INVALID_ARGUMENT);
  ExpectOpError(s.Forward(9), grpc::INVALID_ARGUMENT);
  ExpectOpError(s.Forward(3, {4, 4}), grpc::INVALID_ARGUMENT);
  const uint32_t mask = (*model_)->config().tokens.mask;
  ExpectOpError(s.Commit({{0, mask}})[0], grpc::INVALID_ARGUMENT);
  ExpectOpError(s.Commit({{40, 7}})[0], grpc::INVALID_ARGUMENT);
  ExpectOpError(s.Commit({})[0], grpc::INVALID_ARGUMENT);
  const std::vector<v1::StepResponse> commit = s.Commit({{0, 7}});
  ASSERT_TRUE(commit[0].has_step());
  ExpectOpError(s.Commit({{0, 8}})[0], grpc::FAILED_PRECONDITION);  // already committed
  ExpectOpError(s.Rewind(5), grpc::FAILED_PRECONDITION);            // beyond the history
  v1::StepRequest too_many;
  too_many.mutable_advance()->set_top_candidates(9);
  ExpectOpError(s.One(too_many), grpc::INVALID_ARGUMENT);

  const RunResult run = AdvanceToEnd(s, 1, commit[0].step().text_delta());
  EXPECT_EQ(run.steps, 16);
  ExpectOpError(s.One(advance), grpc::FAILED_PRECONDITION);  // after Final
  ExpectOpError(s.Commit({{1, 7}})[0], grpc::FAILED_PRECONDITION);
  EXPECT_TRUE(s.Forward(1, {0}).has_forward());  // still allowed
  ASSERT_TRUE(s.Rewind(1).has_rewound());
  const std::vector<v1::StepResponse> one = s.Advance(1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].step().step(), 2u);
  EXPECT_TRUE(s.Close().ok());
}

// Counts from the wire keep their value: a uint32 step count runs to the
// Final (an int wrapped and ended the op without one), and positions and
// token ids past any limit are reported as sent, not clamped.
TEST_F(StepContractTest, WireCountsAreCheckedInTheirOwnType) {
  Session s(*stub_);
  ASSERT_TRUE(s.Open(OpenOp()).has_opened());
  const uint32_t huge = 4294967295u;
  ExpectOpError(s.Commit({{huge, 7}})[0], grpc::INVALID_ARGUMENT);
  const v1::StepResponse bad_position = s.Commit({{huge, 7}})[0];
  EXPECT_NE(bad_position.error().message().find(
                "commit.tokens[0].position: 4294967295 is outside the generated region [0, 32)"),
            std::string::npos)
      << bad_position.DebugString();
  const v1::StepResponse bad_token = s.Commit({{3, huge}})[0];
  EXPECT_NE(bad_token.error().message().find("commit.tokens[0].token_id: 4294967295 is outside "
                                             "the vocabulary of 8256"),
            std::string::npos)
      << bad_token.DebugString();
  const v1::StepResponse bad_forward = s.Forward(3, {huge});
  EXPECT_NE(bad_forward.error().message().find("forward.positions[0]: 4294967295"),
            std::string::npos)
      << bad_forward.DebugString();
  v1::StepRequest k;
  k.mutable_forward()->set_top_candidates(huge);
  EXPECT_NE(s.One(k).error().message().find("forward.top_candidates: 4294967295 is more than 8"),
            std::string::npos);
  const std::vector<v1::StepResponse> rs = s.Advance(huge);
  ASSERT_FALSE(rs.empty());
  EXPECT_TRUE(rs.back().has_final()) << rs.back().DebugString();
  EXPECT_EQ(rs.size(), 17u);  // 16 steps, then the Final
  EXPECT_TRUE(s.Close().ok());
}

TEST_F(StepContractTest, CommitThatCompletesTheCanvasIsFollowedByFinal) {
  Session s(*stub_);
  ASSERT_TRUE(s.Open(OpenOp()).has_opened());
  std::vector<std::pair<uint32_t, uint32_t>> all;
  for (uint32_t p = 0; p < 32; ++p) all.push_back({p, 100 + p});
  const std::vector<v1::StepResponse> rs = s.Commit(all);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].step().masked_remaining(), 0u);
  ASSERT_TRUE(rs[1].has_final()) << rs[1].DebugString();
  EXPECT_EQ(rs[1].final().text(), rs[0].step().text_delta());
  EXPECT_TRUE(s.Close().ok());
}

TEST_F(StepContractTest, IdleSessionEndsWithDeadlineExceeded) {
  Session s(*stub_);
  v1::Open open = OpenOp();
  open.set_idle_timeout_seconds(1);
  ASSERT_TRUE(s.Open(open).has_opened());
  ASSERT_EQ(s.Advance(1).size(), 1u);
  const grpc::Status status = s.End();  // no op after this one
  EXPECT_EQ(status.error_code(), grpc::DEADLINE_EXCEEDED) << status.error_message();
  WaitSessionsClosed(*server_);
}

TEST_F(StepContractTest, SessionLimitIsResourceExhausted) {
  Session a(*stub_), b(*stub_), c(*stub_);
  ASSERT_TRUE(a.Open(OpenOp()).has_opened());
  ASSERT_TRUE(b.Open(OpenOp()).has_opened());
  EXPECT_EQ(server_->worker().load().sessions_open, 2);
  v1::StepRequest open;
  *open.mutable_open() = OpenOp();
  EXPECT_TRUE(c.Run(open).empty());
  const grpc::Status status = c.End();
  EXPECT_EQ(status.error_code(), grpc::RESOURCE_EXHAUSTED) << status.error_message();
  bool retry_after = false;
  for (const auto& [k, v] : c.context().GetServerTrailingMetadata()) {
    retry_after |= std::string(k.data(), k.size()) == "retry-after-ms";
  }
  EXPECT_TRUE(retry_after);
  EXPECT_TRUE(a.Close().ok());
  EXPECT_TRUE(b.Close().ok());
  WaitSessionsClosed(*server_);
  // The freed slots are usable again.
  Session d(*stub_);
  ASSERT_TRUE(d.Open(OpenOp()).has_opened());
  EXPECT_TRUE(d.Close().ok());
}

TEST_F(StepContractTest, HalfCloseEndsTheSessionWithOk) {
  Session s(*stub_);
  ASSERT_TRUE(s.Open(OpenOp()).has_opened());
  ASSERT_EQ(s.Advance(2).size(), 2u);
  EXPECT_TRUE(s.WritesDoneAndEnd().ok());
  WaitSessionsClosed(*server_);
}

TEST_F(StepContractTest, ClientCancelFreesTheSessionSlot) {
  {
    // Cancelled while idle.
    Session s(*stub_);
    ASSERT_TRUE(s.Open(OpenOp()).has_opened());
    EXPECT_EQ(server_->worker().load().sessions_open, 1);
    s.context().TryCancel();
    EXPECT_EQ(s.End().error_code(), grpc::CANCELLED);
  }
  WaitSessionsClosed(*server_);
  {
    // Cancelled during a long Advance.
    Session s(*stub_);
    v1::Open open = OpenOp();
    open.mutable_diffusion()->set_gen_length(512);
    open.mutable_diffusion()->set_steps(512);
    open.mutable_diffusion()->set_block_length(512);
    ASSERT_TRUE(s.Open(open).has_opened());
    std::thread cancel([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      s.context().TryCancel();
    });
    s.Advance(512);
    cancel.join();
    EXPECT_EQ(s.End().error_code(), grpc::CANCELLED);
  }
  WaitSessionsClosed(*server_);
}

TEST_F(StepContractTest, DrainEndsSessionsWithUnavailableAfterTheirOp) {
  EngineOptions engine;
  engine.max_sessions = 4;
  auto server = StartTestServer(*model_, kLlada, {.engine = engine});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::DiffusionLM::NewStub(channel);

  Session idle(*stub);
  ASSERT_TRUE(idle.Open(OpenOp()).has_opened());
  Session busy(*stub);
  ASSERT_TRUE(busy.Open(OpenOp()).has_opened());

  // `busy` has an Advance in progress when the drain starts (after its
  // first step arrived): it still gets every response of that op, then
  // UNAVAILABLE.
  std::thread drain;
  busy.set_observer([&](const v1::StepResponse& r) {
    if (r.has_step() && r.step().step() == 1) {
      drain = std::thread([&] { server->Drain(std::chrono::seconds(60)); });
    }
  });
  const std::vector<v1::StepResponse> busy_responses = busy.Advance(16);
  ASSERT_TRUE(drain.joinable());
  const grpc::Status idle_status = idle.End();
  EXPECT_EQ(idle_status.error_code(), grpc::UNAVAILABLE) << idle_status.error_message();
  EXPECT_NE(idle_status.error_message().find("draining"), std::string::npos);
  const grpc::Status busy_status = busy.End();
  EXPECT_EQ(busy_status.error_code(), grpc::UNAVAILABLE) << busy_status.error_message();
  // Every response of the op in progress arrived: 16 steps and the Final.
  ASSERT_EQ(busy_responses.size(), 17u);
  EXPECT_TRUE(busy_responses.back().has_final());
  drain.join();
}

TEST_F(StepContractTest, SessionRefusedWhileDraining) {
  auto server = StartTestServer(*model_, kLlada);
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server->port()), grpc::InsecureChannelCredentials()));
  server->admission().StartDraining();
  Session s(*stub);
  v1::StepRequest open;
  *open.mutable_open() = OpenOp();
  EXPECT_TRUE(s.Run(open).empty());
  const grpc::Status status = s.End();
  EXPECT_EQ(status.error_code(), grpc::UNAVAILABLE) << status.error_message();
}

// The value of the first series of `family` whose labels contain every one
// of `labels`; -1 when there is none.
double Series(const std::string& text, const std::string& family,
              const std::vector<std::string>& labels) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(family + "{", 0) != 0 && line.rfind(family + " ", 0) != 0) continue;
    bool all = true;
    for (const std::string& l : labels) all &= line.find(l) != std::string::npos;
    if (all) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

// A server of its own with metrics, and a stub to it (the server goes
// before its metrics).
struct MeteredServer {
  std::unique_ptr<ServiceMetrics> metrics;
  std::unique_ptr<DllmServer> server;
  std::unique_ptr<v1::DiffusionLM::Stub> stub;
};

MeteredServer StartMetered(std::shared_ptr<const Model> model) {
  MeteredServer m;
  MetricsOptions mo;
  mo.model_name = "tiny";
  auto metrics = ServiceMetrics::Create(mo);
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  if (!metrics.ok()) return m;
  m.metrics = std::move(*metrics);
  m.server = StartTestServer(std::move(model), kLlada, {.metrics = m.metrics.get()});
  if (m.server != nullptr) {
    m.stub = v1::DiffusionLM::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(m.server->port()), grpc::InsecureChannelCredentials()));
  }
  return m;
}

// Issue #35: the worker runs every forward, the Forward probe's too, so a
// probe rides in the same batch as another session's steps; its candidates
// are those it gets alone (a row's bits do not depend on the batch).
TEST_F(StepContractTest, ForwardProbesRideTheBatchWithOtherSessionsSteps) {
  MeteredServer m = StartMetered(*model_);
  ASSERT_NE(m.server, nullptr);
  ServiceMetrics* metrics = m.metrics.get();
  v1::DiffusionLM::Stub* stub = m.stub.get();
  Session prober(*stub);
  ASSERT_TRUE(prober.Open(OpenOp()).has_opened());
  const v1::StepResponse alone = prober.Forward(3);
  ASSERT_TRUE(alone.has_forward()) << alone.DebugString();
  const std::string text_alone = metrics->Serialize();
  EXPECT_EQ(Series(text_alone, "dllm_forward_duration_seconds_count", {}), 1) << text_alone;

  std::atomic<bool> advancing{true};
  std::thread other([&] {
    Session s(*stub);
    v1::Open open = OpenOp();
    open.mutable_sampling()->set_seed(9);
    // 64 steps, one a turn: the probes have many turns to share.
    open.mutable_diffusion()->set_gen_length(64);
    open.mutable_diffusion()->set_steps(64);
    ASSERT_TRUE(s.Open(open).has_opened());
    const std::vector<v1::StepResponse> rs = s.Advance(1000);
    EXPECT_FALSE(rs.empty());
    EXPECT_TRUE(s.Close().ok());
    advancing = false;
  });
  int probes = 0;
  while (advancing.load() && probes < 200) {
    const v1::StepResponse again = prober.Forward(3);
    ASSERT_TRUE(again.has_forward()) << again.DebugString();
    ASSERT_EQ(again.forward().candidates_size(), alone.forward().candidates_size());
    for (int i = 0; i < again.forward().candidates_size(); ++i) {
      const auto &a = again.forward().candidates(i), &b = alone.forward().candidates(i);
      ASSERT_EQ(a.position(), b.position());
      ASSERT_EQ(a.candidates_size(), b.candidates_size());
      for (int t = 0; t < a.candidates_size(); ++t) {
        EXPECT_EQ(a.candidates(t).token_id(), b.candidates(t).token_id());
        EXPECT_EQ(a.candidates(t).prob(), b.candidates(t).prob());
      }
    }
    ++probes;
  }
  other.join();
  EXPECT_TRUE(prober.Close().ok());
  const std::string text = metrics->Serialize();
  using ::dllm::testing::SumOfSamples;
  // Every forward, probes included, went through the worker's batches, and
  // some carried a probe and a step together.
  EXPECT_EQ(SumOfSamples(text, "dllm_forward_duration_seconds_count"),
            SumOfSamples(text, "dllm_batch_requests_count"))
      << text;
  EXPECT_GT(SumOfSamples(text, "dllm_batch_requests_sum"),
            SumOfSamples(text, "dllm_batch_requests_count"))
      << probes << " probes never shared a forward:\n"
      << text;
}

TEST_F(StepContractTest, SessionMetrics) {
  MeteredServer m = StartMetered(*model_);
  ASSERT_NE(m.server, nullptr);
  ServiceMetrics* metrics = m.metrics.get();
  v1::DiffusionLM::Stub* stub = m.stub.get();
  {
    Session s(*stub);
    ASSERT_TRUE(s.Open(OpenOp()).has_opened());
    EXPECT_EQ(Series(metrics->Serialize(), "dllm_sessions_open", {}), 1);
    ASSERT_EQ(s.Advance(3).size(), 3u);
    EXPECT_TRUE(s.Close().ok());
  }
  // The call's end is counted in OnDone, which may follow the client's view.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string text;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    text = metrics->Serialize();
  } while (Series(text, "dllm_requests_total", {"rpc=\"Step\"", "code=\"OK\""}) != 1 &&
           std::chrono::steady_clock::now() < until);
  EXPECT_EQ(Series(text, "dllm_requests_total", {"rpc=\"Step\"", "code=\"OK\""}), 1) << text;
  EXPECT_EQ(Series(text, "dllm_steps_total", {}), 3);
  // Opened, three StepEvents, Closed.
  EXPECT_EQ(Series(text, "dllm_stream_events_sent_total", {"rpc=\"Step\""}), 5);
  // Closed before the canvas was complete: "closed", not "length".
  EXPECT_EQ(Series(text, "dllm_requests_finished_total", {"finish_reason=\"closed\""}), 1);
  EXPECT_EQ(Series(text, "dllm_requests_finished_total", {"finish_reason=\"length\""}), 0);

  // A stream that never opens a session ran no request: not counted as one.
  {
    Session s(*stub);
    EXPECT_TRUE(s.Close().ok());
  }
  // A session run to its Final: "length" (or "eos").
  {
    Session s(*stub);
    ASSERT_TRUE(s.Open(OpenOp()).has_opened());
    const std::vector<v1::StepResponse> rs = s.Advance(1000);
    ASSERT_FALSE(rs.empty());
    EXPECT_TRUE(rs.back().has_final());
    EXPECT_TRUE(s.Close().ok());
  }
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    text = metrics->Serialize();
  } while (Series(text, "dllm_requests_total", {"rpc=\"Step\"", "code=\"OK\""}) != 3 &&
           std::chrono::steady_clock::now() < until);
  EXPECT_EQ(Series(text, "dllm_requests_finished_total", {"finish_reason=\"closed\""}), 1);
  EXPECT_EQ(Series(text, "dllm_requests_finished_total", {"finish_reason=\"length\""}) +
                Series(text, "dllm_requests_finished_total", {"finish_reason=\"eos\""}),
            1);
  m.server.reset();
  EXPECT_EQ(Series(metrics->Serialize(), "dllm_sessions_open", {}), 0);
}

}  // namespace
}  // namespace dllm
