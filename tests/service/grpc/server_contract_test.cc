// Contract tests of the dllm.v1 server against a real server on loopback
// (started in-process on 127.0.0.1:0 with the tiny test models): event
// order, text deltas, results identical to DenoiseSession, validation
// before compute, admission limits, cancellation (latency logged),
// deadlines, concurrent streams, health, reflection, drain and TLS.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <tbb/task_arena.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "dllm/v1/dllm.grpc.pb.h"
#include "engine/base/utf8.h"
#include "engine/sampler/entropy_bound_sampler.h"
#include "engine/session/denoise_session.h"
#include "engine/tokenizer/chat_template.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "service/grpc/proto_request.h"
#include "service/grpc/server.h"
#include "service/json/json.h"
#include "service/metrics/service_metrics.h"
#include "src/proto/grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/test_server.h"
#include "tests/testing/wait.h"

namespace dllm {
namespace {

using Clock = std::chrono::steady_clock;

using ::dllm::testing::ConnectLocal;
using ::dllm::testing::LoadTestModel;
using ::dllm::testing::StartTestServer;
using ::dllm::testing::TestModelPath;

struct CallResult {
  std::vector<v1::GenerateEvent> events;
  grpc::Status status;
  std::map<std::string, std::string> trailers;

  const v1::Final* final() const {
    for (const auto& e : events) {
      if (e.has_final()) return &e.final();
    }
    return nullptr;
  }
  std::string Deltas() const {
    std::string s;
    for (const auto& e : events) {
      if (e.has_step()) s += e.step().text_delta();
    }
    return s;
  }
  int Count(v1::GenerateEvent::EventCase c) const {
    int n = 0;
    for (const auto& e : events) n += e.event_case() == c;
    return n;
  }
};

// Runs one Generate to the end. `on_event` may cancel through the context.
CallResult Generate(
    v1::DiffusionLM::Stub& stub, const v1::GenerateRequest& request,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
    const std::function<void(grpc::ClientContext*, const v1::GenerateEvent&)>& on_event = nullptr) {
  CallResult r;
  grpc::ClientContext ctx;
  if (timeout.count() > 0) ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  auto reader = stub.Generate(&ctx, request);
  v1::GenerateEvent e;
  while (reader->Read(&e)) {
    r.events.push_back(e);
    if (on_event) on_event(&ctx, e);
  }
  r.status = reader->Finish();
  for (const auto& [k, v] : ctx.GetServerTrailingMetadata()) {
    r.trailers[std::string(k.data(), k.size())] = std::string(v.data(), v.size());
  }
  return r;
}

v1::GenerateRequest Request(const std::string& text, int gen, int steps, int block) {
  v1::GenerateRequest r;
  r.mutable_prompt()->set_text(text);
  r.mutable_diffusion()->set_gen_length(gen);
  r.mutable_diffusion()->set_steps(steps);
  r.mutable_diffusion()->set_block_length(block);
  return r;
}

// A request whose steps take a while: nearly the whole context, one block,
// no early exit; an event every step.
v1::GenerateRequest LongRequest() {
  v1::GenerateRequest r = Request("a long one", 960, 960, 960);
  r.mutable_diffusion()->set_early_exit(false);
  r.mutable_stream()->set_detail(v1::DETAIL_STEPS);
  return r;
}

struct Reference {
  std::vector<int32_t> tokens;
  std::string text;
};

// The same generation through DenoiseSession directly, as the CLI runs it
// (its own forward pass, not the server's; an entropy-bound answer capped
// at gen_length as the server caps it).
Reference RunReference(const std::shared_ptr<const Model>& model, const char* name,
                       const v1::GenerateRequest& request) {
  auto spec = ValidateGenerateRequest(request, *model, TestModelPath(name));
  EXPECT_TRUE(spec.ok()) << spec.status();
  Reference ref;
  if (!spec.ok()) return ref;
  tbb::task_arena arena(1);
  arena.execute([&] {
    auto session = spec->entropy_bound
                       ? DenoiseSession::Create(model, spec->entropy_bound->config, spec->prompt,
                                                spec->entropy_bound->run, spec->caching)
                       : DenoiseSession::Create(model, spec->sampler, spec->prompt, spec->caching);
    ASSERT_TRUE(session.ok()) << session.status();
    while (!(*session)->done()) ASSERT_TRUE((*session)->Advance().ok());
    const auto out = (*session)->OutputTokens();
    ref.tokens.assign(out.begin(),
                      out.begin() + std::min<ptrdiff_t>(out.size(), spec->sampler.gen_length));
  });
  DecodeOptions plain;
  plain.render_special = false;
  ref.text = SanitizeUtf8(model->tokenizer().Decode(ref.tokens, plain).value_or(""));
  return ref;
}

void ExpectWellFormed(const CallResult& r, const std::string& request_id = "") {
  ASSERT_TRUE(r.status.ok()) << r.status.error_code() << " " << r.status.error_message();
  ASSERT_FALSE(r.events.empty());
  EXPECT_TRUE(r.events.front().has_started());
  EXPECT_TRUE(r.events.back().has_final());
  EXPECT_EQ(r.Count(v1::GenerateEvent::kStarted), 1);
  EXPECT_EQ(r.Count(v1::GenerateEvent::kFinal), 1);
  // Only the last StepEvent (if any streamed) announces the Final.
  for (size_t i = 0; i + 1 < r.events.size(); ++i) {
    if (!r.events[i].has_step()) continue;
    EXPECT_EQ(r.events[i].step().final_follows(), i + 2 == r.events.size()) << "event " << i;
  }
  const std::string id = request_id.empty() ? r.events.front().request_id() : request_id;
  EXPECT_FALSE(id.empty());
  for (const auto& e : r.events) EXPECT_EQ(e.request_id(), id);
  // StepEvents come after Started and in order.
  uint32_t last_step = 0;
  for (const auto& e : r.events) {
    if (!e.has_step()) continue;
    EXPECT_GT(e.step().step(), last_step);
    last_step = e.step().step();
  }
}

std::vector<int32_t> Ids(const google::protobuf::RepeatedField<uint32_t>& ids) {
  return std::vector<int32_t>(ids.begin(), ids.end());
}

class ServerContractTest : public ::testing::Test {
 protected:
  static constexpr const char* kLlada = "tiny-llada-k-q4_k_m.gguf";
  static constexpr const char* kDream = "tiny-dream-k-q4_k_m.gguf";

  static void SetUpTestSuite() {
    model_ = new std::shared_ptr<const Model>(LoadTestModel(kLlada));
    EngineOptions engine;
    engine.max_running = 1;
    engine.max_queue = 2;
    server_ = StartTestServer(*model_, kLlada, {.engine = engine}).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    channel_ = ConnectLocal(server_->port());
    stub_ = v1::DiffusionLM::NewStub(channel_);
  }
  // Waits until the engine has nothing admitted (earlier tests' cancels).
  void WaitEngineIdle() { ASSERT_TRUE(server_->worker().WaitIdle(std::chrono::seconds(20))); }

  static std::shared_ptr<const Model>* model_;
  static DllmServer* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DiffusionLM::Stub> stub_;
};
std::shared_ptr<const Model>* ServerContractTest::model_;
DllmServer* ServerContractTest::server_;

TEST_F(ServerContractTest, StepsDetailEventOrderAndDeltas) {
  v1::GenerateRequest req = Request("The capital of France is", 32, 16, 8);
  req.set_request_id("order-1");
  req.mutable_stream()->set_detail(v1::DETAIL_STEPS);
  req.mutable_stream()->set_include_timings(true);
  const CallResult r = Generate(*stub_, req);
  ExpectWellFormed(r, "order-1");
  const v1::Final* f = r.final();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(r.Deltas(), f->text());
  const Reference ref = RunReference(*model_, kLlada, req);
  EXPECT_EQ(Ids(f->token_ids()), ref.tokens);
  EXPECT_EQ(f->text(), ref.text);
  const v1::Started& started = r.events.front().started();
  EXPECT_EQ(started.gen_length(), 32u);
  EXPECT_EQ(started.block_length(), 8u);
  EXPECT_EQ(started.planned_steps(), 16u);
  EXPECT_EQ(started.algorithm(), v1::ALGORITHM_LOW_CONFIDENCE);
  EXPECT_EQ(started.seed(), f->seed());
  // Every committed position appears once, pieces filled, merged steps add up.
  std::set<uint32_t> positions;
  uint32_t merged = 0;
  for (const auto& e : r.events) {
    if (!e.has_step()) continue;
    merged += e.step().merged_steps();
    EXPECT_TRUE(e.step().has_timings());
    for (const auto& t : e.step().committed()) {
      EXPECT_TRUE(positions.insert(t.position()).second);
      EXPECT_LT(t.position(), 32u);
    }
  }
  EXPECT_EQ(merged, f->usage().steps());
  EXPECT_EQ(f->usage().prompt_tokens(), started.prompt_tokens());
  EXPECT_EQ(f->usage().canvas_tokens(), started.prompt_tokens() + 32);
  EXPECT_GT(f->timings().total_seconds(), 0);
}

TEST_F(ServerContractTest, TopCandidatesForEveryCommittedPosition) {
  v1::GenerateRequest req = Request("The capital of France is", 32, 16, 16);
  req.mutable_stream()->set_detail(v1::DETAIL_STEPS);
  req.mutable_stream()->set_top_candidates(3);
  const CallResult r = Generate(*stub_, req);
  ExpectWellFormed(r);
  int checked = 0;
  for (const auto& e : r.events) {
    if (!e.has_step()) continue;
    ASSERT_EQ(e.step().candidates_size(), e.step().committed_size());
    for (int i = 0; i < e.step().committed_size(); ++i) {
      const v1::CommittedToken& t = e.step().committed(i);
      const v1::PositionCandidates& pc = e.step().candidates(i);
      EXPECT_EQ(pc.position(), t.position());
      ASSERT_EQ(pc.candidates_size(), 3);
      // Greedy low-confidence commits the argmax.
      EXPECT_EQ(pc.candidates(0).token_id(), t.token_id());
      EXPECT_GE(pc.candidates(0).prob(), pc.candidates(1).prob());
      EXPECT_GE(pc.candidates(1).prob(), pc.candidates(2).prob());
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST_F(ServerContractTest, ProgressHeartbeatsInFinalOnlyMode) {
  WaitEngineIdle();
  v1::GenerateRequest req = LongRequest();
  req.mutable_stream()->set_detail(v1::DETAIL_FINAL_ONLY);
  req.mutable_stream()->set_heartbeat_seconds(1);
  const CallResult r = Generate(*stub_, req, std::chrono::milliseconds(1800));
  EXPECT_EQ(r.status.error_code(), grpc::DEADLINE_EXCEEDED);
  ASSERT_FALSE(r.events.empty());
  EXPECT_TRUE(r.events.front().has_started());
  EXPECT_GE(r.Count(v1::GenerateEvent::kProgress), 1);
  EXPECT_EQ(r.Count(v1::GenerateEvent::kStep), 0);
  for (const auto& e : r.events) {
    if (e.has_progress()) {
      EXPECT_EQ(e.progress().planned_steps(), 960u);
    }
  }
  WaitEngineIdle();
}

TEST_F(ServerContractTest, GreedyAndSeededMatchDenoiseSession) {
  const std::pair<float, v1::Detail> runs[] = {
      {0.0f, v1::DETAIL_TEXT}, {0.0f, v1::DETAIL_FINAL_ONLY}, {0.9f, v1::DETAIL_CANVAS}};
  for (const auto& [temperature, detail] : runs) {
    {
      SCOPED_TRACE(::testing::Message() << "temperature " << temperature << " detail " << detail);
      v1::GenerateRequest req = Request("Once upon a time", 64, 16, 32);
      req.mutable_sampling()->set_temperature(temperature);
      req.mutable_sampling()->set_seed(1234);
      req.mutable_stream()->set_detail(detail);
      req.mutable_stream()->set_step_stride(3);
      const CallResult r = Generate(*stub_, req);
      ExpectWellFormed(r);
      const Reference ref = RunReference(*model_, kLlada, req);
      ASSERT_NE(r.final(), nullptr);
      EXPECT_EQ(Ids(r.final()->token_ids()), ref.tokens);
      EXPECT_EQ(r.final()->text(), ref.text);
      EXPECT_EQ(r.final()->seed(), 1234u);
      if (detail == v1::DETAIL_FINAL_ONLY) {
        EXPECT_EQ(r.Count(v1::GenerateEvent::kStep), 0);
      } else {
        EXPECT_EQ(r.Deltas(), r.final()->text());
      }
      for (const auto& e : r.events) {
        if (!e.has_step()) continue;
        EXPECT_EQ(e.step().canvas_size(), detail == v1::DETAIL_CANVAS ? 64 : 0);
        if (detail == v1::DETAIL_TEXT) {
          EXPECT_EQ(e.step().committed_size(), 0);
        }
      }
    }
  }
}

TEST_F(ServerContractTest, DreamMatchesDenoiseSession) {
  auto dream = LoadTestModel(kDream);
  ASSERT_NE(dream, nullptr);
  auto server = StartTestServer(dream, kDream);
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal(server->port()));
  v1::GenerateRequest req = Request("Write a poem", 32, 16, 0);
  req.mutable_diffusion()->set_algorithm(v1::ALGORITHM_MASKGIT_PLUS);
  req.mutable_sampling()->set_temperature(0.7f);
  req.mutable_sampling()->set_top_p(0.95f);
  req.mutable_sampling()->set_seed(99);
  const CallResult r = Generate(*stub, req);
  ExpectWellFormed(r);
  const Reference ref = RunReference(dream, kDream, req);
  EXPECT_EQ(Ids(r.final()->token_ids()), ref.tokens);
  EXPECT_EQ(r.final()->text(), ref.text);
  EXPECT_EQ(r.Deltas(), r.final()->text());
  EXPECT_EQ(r.events.front().started().algorithm(), v1::ALGORITHM_MASKGIT_PLUS);
}

// DiffusionGemma's file (tests/data/logits-dg), as the server's model name.
constexpr const char* kGemma = "../logits-dg/tiny-diffusion-gemma-q8_0.gguf";

// A DiffusionGemma file is served with its own sampler by default: the
// same tokens as the CLI's session for the seed, canvas after canvas,
// whatever the detail; Started says what ran; canvas events show the
// renoised canvas and its argmax; the stable text grows a canvas at a time.
TEST(DiffusionGemmaServingTest, GenerateRunsTheEntropyBoundSampler) {
  auto gemma = LoadTestModel(kGemma);
  ASSERT_NE(gemma, nullptr);
  const int canvas = gemma->config().canvas_length;
  ASSERT_GT(canvas, 0);
  auto server = StartTestServer(gemma, kGemma);
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal(server->port()));
  int multi_canvas_runs = 0;
  for (const uint32_t seed : {1u, 3u, 5u, 11u}) {
    for (const v1::Detail detail : {v1::DETAIL_TEXT, v1::DETAIL_STEPS, v1::DETAIL_CANVAS}) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " detail " << detail);
      v1::GenerateRequest req;
      req.mutable_prompt()->set_text("Hello there");
      req.mutable_diffusion()->set_gen_length(3 * canvas);
      req.mutable_sampling()->set_seed(seed);
      req.mutable_stream()->set_detail(detail);
      if (detail == v1::DETAIL_STEPS) req.mutable_stream()->set_step_stride(4);
      const CallResult r = Generate(*stub, req);
      ExpectWellFormed(r);
      const v1::Final* f = r.final();
      ASSERT_NE(f, nullptr);
      const Reference ref = RunReference(gemma, kGemma, req);
      EXPECT_EQ(Ids(f->token_ids()), ref.tokens);
      EXPECT_EQ(f->text(), ref.text);
      EXPECT_EQ(r.Deltas(), f->text());
      EXPECT_EQ(f->seed(), seed);
      EXPECT_EQ(f->finish_reason(), static_cast<int>(ref.tokens.size()) < 3 * canvas
                                        ? v1::FINISH_REASON_EOS
                                        : v1::FINISH_REASON_LENGTH);
      const v1::Started& started = r.events.front().started();
      EXPECT_EQ(started.sampler(), v1::SAMPLER_ENTROPY_BOUND);
      EXPECT_EQ(started.canvas_length(), static_cast<uint32_t>(canvas));
      EXPECT_EQ(started.gen_length(), static_cast<uint32_t>(3 * canvas));
      EXPECT_EQ(started.algorithm(), v1::ALGORITHM_UNSPECIFIED);
      const EntropyBoundConfig file = *EntropyBoundConfigFromGguf(gemma->file());
      EXPECT_EQ(started.entropy_bound().max_steps(), static_cast<uint32_t>(file.max_steps));
      EXPECT_EQ(started.entropy_bound().t_max(), file.t_max);
      EXPECT_EQ(started.planned_steps(), static_cast<uint32_t>(3 * file.max_steps));
      uint32_t merged = 0, last_canvas = 0;
      for (const auto& e : r.events) {
        if (!e.has_step()) continue;
        const v1::StepEvent& step = e.step();
        merged += step.merged_steps();
        EXPECT_EQ(step.masked_remaining(), 0u);
        EXPECT_GE(step.block_index(), last_canvas);
        last_canvas = step.block_index();
        ASSERT_TRUE(step.has_canvas_step());
        EXPECT_EQ(step.canvas_step().canvas(), step.block_index());
        EXPECT_GT(step.canvas_step().temperature(), 0);
        EXPECT_GE(step.canvas_step().accepted(), 1u);
        if (detail == v1::DETAIL_TEXT) {
          EXPECT_EQ(step.committed_size(), 0);
          EXPECT_EQ(step.canvas_size(), 0);
        } else {
          // One step's rewrite of the whole canvas, even when merged.
          EXPECT_EQ(step.committed_size(), canvas);
          for (const auto& t : step.committed()) {
            EXPECT_GE(t.position(), step.block_index() * canvas);
            EXPECT_LT(t.position(), (step.block_index() + 1) * canvas);
          }
        }
        if (detail == v1::DETAIL_CANVAS) {
          // The finished canvases, kept whole in the answer, then the one
          // the next step reads (after the step that finished canvas k,
          // canvas k + 1's random start).
          const int k = static_cast<int>(step.block_index());
          EXPECT_EQ(step.canvas_size() % canvas, 0);
          EXPECT_GE(step.canvas_size(), (k + 1) * canvas);
          EXPECT_LE(step.canvas_size(), (k + 2) * canvas);
          for (int p = 0; p < k * canvas; ++p) {
            EXPECT_EQ(step.canvas(p), f->token_ids(p)) << "position " << p;
          }
          EXPECT_EQ(step.canvas_step().argmax_size(), canvas);
        } else {
          EXPECT_EQ(step.canvas_step().argmax_size(), 0);
        }
      }
      // DETAIL_TEXT streams only when the text grows.
      if (detail != v1::DETAIL_TEXT) EXPECT_EQ(merged, f->usage().steps());
      if (last_canvas > 0) ++multi_canvas_runs;
    }
  }
  // Some seed ran past its first canvas (the test file's loops and stops
  // end others early).
  EXPECT_GT(multi_canvas_runs, 0);
}

// The cache is exact: CACHE_NONE gives the default's tokens. The masked
// stand-in runs on request, and what does not apply is refused by name.
TEST(DiffusionGemmaServingTest, CachesStandInAndRefusals) {
  auto gemma = LoadTestModel(kGemma);
  ASSERT_NE(gemma, nullptr);
  auto server = StartTestServer(gemma, kGemma);
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal(server->port()));
  v1::GenerateRequest req;
  req.mutable_prompt()->set_text("def main():");
  req.mutable_diffusion()->set_gen_length(40);
  req.mutable_sampling()->set_seed(7);
  const CallResult exact = Generate(*stub, req);
  ExpectWellFormed(exact);
  req.mutable_diffusion()->set_cache(v1::CACHE_NONE);
  const CallResult none = Generate(*stub, req);
  ExpectWellFormed(none);
  EXPECT_EQ(Ids(none.final()->token_ids()), Ids(exact.final()->token_ids()));
  {
    v1::GenerateRequest masked = Request("def main():", 16, 8, 16);
    masked.mutable_diffusion()->set_sampler(v1::SAMPLER_MASKED);
    const CallResult r = Generate(*stub, masked);
    ExpectWellFormed(r);
    EXPECT_EQ(r.events.front().started().sampler(), v1::SAMPLER_MASKED);
    EXPECT_EQ(r.events.front().started().planned_steps(), 8u);
    const Reference ref = RunReference(gemma, kGemma, masked);
    EXPECT_EQ(Ids(r.final()->token_ids()), ref.tokens);
  }
  const std::pair<std::function<void(v1::GenerateRequest*)>, const char*> refusals[] = {
      {[](auto* r) { r->mutable_sampling()->set_temperature(0.5f); }, "sampling.temperature"},
      {[](auto* r) { r->mutable_diffusion()->set_steps(8); }, "diffusion.steps"},
      {[](auto* r) { r->mutable_diffusion()->set_threshold(0.9f); }, "diffusion.threshold"},
      {[](auto* r) { r->mutable_diffusion()->set_cache(v1::CACHE_DUAL); }, "diffusion.cache"},
      {[](auto* r) { r->mutable_sampling()->set_seed(1ull << 32); }, "sampling.seed"},
      {[](auto* r) { r->mutable_prompt()->mutable_suffix()->set_text("x"); }, "prompt.suffix"},
      {[](auto* r) { r->mutable_diffusion()->mutable_entropy_bound()->set_t_min(2.0f); },
       "diffusion.entropy_bound.t_max"},
      {[](auto* r) { r->mutable_diffusion()->mutable_entropy_bound()->set_max_steps(0); },
       "diffusion.entropy_bound.max_steps"},
      {[](auto* r) {
         r->mutable_stream()->set_detail(v1::DETAIL_STEPS);
         r->mutable_stream()->set_include_logprobs(true);
       },
       "stream.include_logprobs"},
      {[](auto* r) {
         r->mutable_diffusion()->set_sampler(v1::SAMPLER_MASKED);
         r->mutable_diffusion()->mutable_entropy_bound()->set_max_steps(4);
       },
       "diffusion.entropy_bound"},
      {[](auto* r) {
         r->mutable_diffusion()->set_sampler(v1::SAMPLER_MASKED);
         r->mutable_diffusion()->set_cache(v1::CACHE_EXACT);
       },
       "diffusion.cache"},
  };
  {
    // The model's advertised defaults, sent back as they are, run.
    grpc::ClientContext ctx;
    v1::ModelInfo info;
    ASSERT_TRUE(stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok());
    EXPECT_EQ(info.default_diffusion().sampler(), v1::SAMPLER_ENTROPY_BOUND);
    v1::GenerateRequest defaults;
    defaults.mutable_prompt()->set_text("def main():");
    *defaults.mutable_diffusion() = info.default_diffusion();
    *defaults.mutable_sampling() = info.default_sampling();
    defaults.mutable_sampling()->set_seed(7);
    const CallResult r = Generate(*stub, defaults);
    ExpectWellFormed(r);
    EXPECT_EQ(r.events.front().started().entropy_bound().max_steps(),
              info.default_diffusion().entropy_bound().max_steps());
  }
  for (const auto& [edit, field] : refusals) {
    v1::GenerateRequest bad = req;
    bad.mutable_diffusion()->clear_cache();
    edit(&bad);
    const CallResult r = Generate(*stub, bad);
    EXPECT_EQ(r.status.error_code(), grpc::INVALID_ARGUMENT) << field;
    EXPECT_TRUE(absl::StartsWith(r.status.error_message(), field))
        << field << ": " << r.status.error_message();
    EXPECT_TRUE(r.events.empty()) << field;
  }
}

// LLaDA2's file (tests/data/llada2), as the server's model name.
constexpr const char* kLlada2 = "../llada2/tiny-llada2-q8_0.gguf";

// A LLaDA2 file is served with the official LLaDA2 sampler and its exact
// block cache: the session's tokens at every detail, for 2.0 (threshold
// or schedule) and 2.1 (editing) settings; Started says what ran; step
// events name the block (from the one holding the first generated
// position) and, for an edit, the token it replaced; the stable text
// waits for a block to finish under editing.
TEST(Llada2ServingTest, GenerateRunsTheLlada2Sampler) {
  auto model = LoadTestModel(kLlada2);
  ASSERT_NE(model, nullptr);
  auto server = StartTestServer(model, kLlada2);
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal(server->port()));
  int edits = 0;
  for (const bool editing : {false, true}) {
    for (const v1::Detail detail : {v1::DETAIL_TEXT, v1::DETAIL_STEPS, v1::DETAIL_CANVAS}) {
      SCOPED_TRACE(::testing::Message() << "editing " << editing << " detail " << detail);
      v1::GenerateRequest req;
      req.mutable_prompt()->set_text("def f(x):\n");
      req.mutable_diffusion()->set_gen_length(40);
      req.mutable_diffusion()->set_threshold(editing ? 0.7f : 0.5f);
      if (editing) {
        req.mutable_diffusion()->mutable_llada2()->set_editing_threshold(0.5f);
        req.mutable_diffusion()->mutable_llada2()->set_max_post_steps(3);
      }
      req.mutable_stream()->set_detail(detail);
      const CallResult r = Generate(*stub, req);
      ExpectWellFormed(r);
      const v1::Final* f = r.final();
      ASSERT_NE(f, nullptr);
      const Reference ref = RunReference(model, kLlada2, req);
      EXPECT_EQ(Ids(f->token_ids()), ref.tokens);
      EXPECT_EQ(f->text(), ref.text);
      EXPECT_EQ(r.Deltas(), f->text());
      const v1::Started& started = r.events.front().started();
      EXPECT_EQ(started.block_length(), 32u);
      EXPECT_EQ(started.planned_steps(), 0u);  // threshold and blocks: not known in advance
      EXPECT_EQ(started.llada2().steps_per_block(), 32u);
      EXPECT_EQ(started.llada2().has_editing_threshold(), editing);
      EXPECT_FLOAT_EQ(started.threshold(), editing ? 0.7f : 0.5f);
      EXPECT_EQ(f->usage().canvas_tokens(), 64u);  // the prompt's 7 + 40, to whole blocks
      for (const auto& e : r.events) {
        if (!e.has_step()) continue;
        const v1::StepEvent& step = e.step();
        EXPECT_LE(step.block_index(), 1u);
        for (const v1::CommittedToken& t : step.committed()) {
          if (!t.has_replaced_token_id()) continue;
          EXPECT_TRUE(editing) << "2.0 never rewrites a written token";
          EXPECT_NE(t.replaced_token_id(), t.token_id());
          ++edits;
        }
        if (detail == v1::DETAIL_CANVAS) EXPECT_EQ(step.canvas_size(), 64 - 7);
      }
    }
  }
  EXPECT_GT(edits, 0) << "no LLaDA2.1 edit was streamed";
}

// The block cache is exact: CACHE_NONE gives the default's tokens. What
// does not apply is refused by name, and the advertised defaults run.
TEST(Llada2ServingTest, CacheRefusalsAndDefaults) {
  auto model = LoadTestModel(kLlada2);
  ASSERT_NE(model, nullptr);
  auto server = StartTestServer(model, kLlada2);
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal(server->port()));
  v1::GenerateRequest req;
  req.mutable_prompt()->set_text("Hello");
  req.mutable_diffusion()->set_gen_length(48);
  req.mutable_diffusion()->set_threshold(0.6f);
  req.mutable_diffusion()->mutable_llada2()->set_editing_threshold(0.3f);
  const CallResult exact = Generate(*stub, req);
  ExpectWellFormed(exact);
  req.mutable_diffusion()->set_cache(v1::CACHE_NONE);
  const CallResult none = Generate(*stub, req);
  ExpectWellFormed(none);
  EXPECT_EQ(Ids(none.final()->token_ids()), Ids(exact.final()->token_ids()));
  EXPECT_LT(exact.final()->usage().forward_passes(), 1000u);
  const std::pair<std::function<void(v1::GenerateRequest*)>, const char*> refusals[] = {
      {[](auto* r) { r->mutable_diffusion()->set_steps(8); }, "diffusion.steps"},
      {[](auto* r) { r->mutable_diffusion()->set_eps(0.01f); }, "diffusion.eps"},
      {[](auto* r) { r->mutable_diffusion()->set_cfg_scale(1.0f); }, "diffusion.cfg_scale"},
      {[](auto* r) { r->mutable_diffusion()->set_cache(v1::CACHE_DUAL); }, "diffusion.cache"},
      {[](auto* r) { r->mutable_diffusion()->set_algorithm(v1::ALGORITHM_ENTROPY); },
       "diffusion.algorithm"},
      {[](auto* r) { r->mutable_sampling()->set_alg_temp(0.5f); }, "sampling.alg_temp"},
      {[](auto* r) { r->mutable_prompt()->mutable_suffix()->set_text("x"); }, "prompt.suffix"},
      {[](auto* r) { r->mutable_diffusion()->mutable_llada2()->set_editing_threshold(1.5f); },
       "diffusion.llada2.editing_threshold"},
      {[](auto* r) {
         r->mutable_diffusion()->set_block_length(0), r->mutable_diffusion()->set_threshold(2.0f);
       },
       "diffusion.threshold"},
      {[](auto* r) { r->mutable_diffusion()->set_sampler(v1::SAMPLER_ENTROPY_BOUND); },
       "diffusion.sampler"},
  };
  for (const auto& [edit, field] : refusals) {
    v1::GenerateRequest bad = req;
    bad.mutable_diffusion()->clear_cache();
    edit(&bad);
    const CallResult r = Generate(*stub, bad);
    EXPECT_EQ(r.status.error_code(), grpc::INVALID_ARGUMENT) << field;
    EXPECT_TRUE(absl::StartsWith(r.status.error_message(), field))
        << field << ": " << r.status.error_message();
    EXPECT_TRUE(r.events.empty()) << field;
  }
  grpc::ClientContext ctx;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.default_diffusion().cache(), v1::CACHE_EXACT);
  EXPECT_FLOAT_EQ(info.default_diffusion().threshold(), 0.95f);
  v1::GenerateRequest defaults;
  defaults.mutable_prompt()->set_text("Hello");
  *defaults.mutable_diffusion() = info.default_diffusion();
  *defaults.mutable_sampling() = info.default_sampling();
  const CallResult r = Generate(*stub, defaults);
  ExpectWellFormed(r);
  EXPECT_EQ(r.events.front().started().llada2().steps_per_block(), 32u);
}

TEST_F(ServerContractTest, InvalidFieldsAreRejectedBeforeCompute) {
  struct Case {
    std::function<void(v1::GenerateRequest*)> edit;
    grpc::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](auto* r) { r->clear_prompt(); }, grpc::INVALID_ARGUMENT, "prompt"},
      {[](auto* r) { r->mutable_prompt()->mutable_token_ids()->add_ids(99999); },
       grpc::INVALID_ARGUMENT, "prompt.token_ids.ids[0]"},
      {[](auto* r) { r->mutable_diffusion()->set_block_length(24); }, grpc::INVALID_ARGUMENT,
       "diffusion.block_length: 24 does not divide gen_length 32"},
      {[](auto* r) { r->mutable_diffusion()->set_gen_length(2000); }, grpc::INVALID_ARGUMENT,
       "diffusion.gen_length"},
      {[](auto* r) { r->mutable_diffusion()->set_algorithm(v1::ALGORITHM_TOPK_MARGIN); },
       grpc::INVALID_ARGUMENT, "diffusion.algorithm"},
      {[](auto* r) {
         r->mutable_stream()->set_detail(v1::DETAIL_STEPS);
         r->mutable_stream()->set_top_candidates(12);
       },
       grpc::INVALID_ARGUMENT, "stream.top_candidates"},
      {[](auto* r) { r->set_model("another-model"); }, grpc::INVALID_ARGUMENT, "model"},
      {[](auto* r) { r->mutable_diffusion()->set_sampler(v1::SAMPLER_ENTROPY_BOUND); },
       grpc::INVALID_ARGUMENT, "diffusion.sampler: SAMPLER_ENTROPY_BOUND needs a canvas model"},
  };
  // Invalid UTF-8 in a proto3 string never reaches the service: protobuf
  // refuses to parse the request (gRPC 1.51 answers UNIMPLEMENTED with an
  // empty message). request_validation_test covers the service's own check.
  {
    v1::GenerateRequest req = Request("\xff", 32, 32, 32);
    const CallResult r = Generate(*stub_, req);
    EXPECT_FALSE(r.status.ok());
    EXPECT_TRUE(r.events.empty());
  }
  for (const Case& c : cases) {
    v1::GenerateRequest req = Request("hello", 32, 32, 32);
    c.edit(&req);
    const CallResult r = Generate(*stub_, req);
    EXPECT_EQ(r.status.error_code(), c.code) << c.message << ": " << r.status.error_message();
    EXPECT_NE(r.status.error_message().find(c.message), std::string::npos)
        << r.status.error_message();
    EXPECT_TRUE(r.events.empty()) << c.message;
  }
}

TEST_F(ServerContractTest, CancellationFreesTheSlotWithinALayer) {
  WaitEngineIdle();
  Clock::time_point cancelled_at;
  const CallResult r = Generate(*stub_, LongRequest(), std::chrono::milliseconds(0),
                                [&](grpc::ClientContext* ctx, const v1::GenerateEvent& e) {
                                  if (e.has_step() && cancelled_at == Clock::time_point{}) {
                                    cancelled_at = Clock::now();
                                    ctx->TryCancel();
                                  }
                                });
  EXPECT_EQ(r.status.error_code(), grpc::CANCELLED);
  ASSERT_NE(cancelled_at, Clock::time_point{});
  // Poll until the engine let go of the job.
  while (server_->worker().load().running > 0 &&
         Clock::now() - cancelled_at < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double client_seconds = std::chrono::duration<double>(Clock::now() - cancelled_at).count();
  const double engine_seconds = server_->worker().last_cancel_latency_seconds();
  std::printf(
      "[ cancel ] client cancel -> engine idle %.1f ms (engine-side cancel -> job end %.1f ms)\n",
      client_seconds * 1e3, engine_seconds * 1e3);
  EXPECT_EQ(server_->worker().load().running, 0);
  EXPECT_LT(client_seconds, 5.0);
  EXPECT_GE(engine_seconds, 0.0);
  // The freed slot serves the next request.
  ExpectWellFormed(Generate(*stub_, Request("next", 32, 32, 32)));
}

TEST_F(ServerContractTest, QueueFullIsResourceExhausted) {
  WaitEngineIdle();
  // One running (max_running 1) and two waiting (max_queue 2) fill the server.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::thread> threads;
  std::vector<CallResult> results(3);
  std::mutex mu;
  for (int i = 0; i < 3; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
  }
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto reader = stub_->Generate(contexts[i].get(), LongRequest());
      v1::GenerateEvent e;
      while (reader->Read(&e)) {
        std::lock_guard<std::mutex> lock(mu);
        results[i].events.push_back(e);
      }
      results[i].status = reader->Finish();
    });
  }
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < until) {
    const EngineLoad load = server_->worker().load();
    if (load.running == 1 && load.waiting == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(server_->worker().load().waiting, 2);
  const CallResult rejected = Generate(*stub_, Request("one too many", 32, 32, 32));
  EXPECT_EQ(rejected.status.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(rejected.status.error_message().find("max_queue 2"), std::string::npos);
  EXPECT_EQ(rejected.trailers.count("retry-after-ms"), 1u);
  EXPECT_TRUE(rejected.events.empty());

  // Server info shows the live load.
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.requests_running(), 1u);
  EXPECT_EQ(info.requests_waiting(), 2u);
  EXPECT_EQ(info.max_waiting(), 2u);

  for (auto& c : contexts) c->TryCancel();
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r.status.error_code(), grpc::CANCELLED);
  WaitEngineIdle();
}

TEST_F(ServerContractTest, MemoryBudgetIsCheckedAtAdmission) {
  EngineOptions engine;
  engine.max_batch_rows = 64;
  // The engine's pass, and less than any canvas's logits.
  engine.memory_budget_bytes = EngineWorker::PassBytes((*model_)->config(), 64) + (1 << 10);
  auto server = StartTestServer(*model_, kLlada, {.engine = engine});
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal(server->port()));
  const CallResult r = Generate(*stub, Request("hello", 32, 32, 32));
  // It could never fit, even alone: a permanent error, with no retry-after
  // to suggest otherwise (issue #34 R7).
  EXPECT_EQ(r.status.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_NE(r.status.error_message().find("--memory-budget-mb"), std::string::npos)
      << r.status.error_message();
  EXPECT_EQ(r.trailers.count("retry-after-ms"), 0u);
  EXPECT_TRUE(r.events.empty());
}

// A strictly sequential client (each request after the previous stream
// ended) is never refused, even with no queue and a budget of exactly one
// request: the slot and the memory are free before the Final is sent.
TEST_F(ServerContractTest, SequentialClientsAreNeverRefused) {
  const v1::GenerateRequest req = Request("hello", 32, 32, 32);
  const EngineWorker::Reservation one = EngineWorker::ReservationFor(
      (*model_)->config(),
      *SamplerConfigFromProto(req.diffusion(), req.sampling(), (*model_)->config()), {},
      static_cast<int>((*model_)->tokenizer().Encode("hello", true, true).size()) + 32);
  EngineOptions engine;
  engine.max_running = 1;
  engine.max_queue = 0;
  engine.max_batch_rows = 64;
  engine.memory_budget_bytes = EngineWorker::PassBytes((*model_)->config(), 64) + one.bytes;
  auto server = StartTestServer(*model_, kLlada, {.engine = engine});
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal(server->port()));
  int refused = 0;
  for (int i = 0; i < 60; ++i) {
    const CallResult r = Generate(*stub, req);
    refused += r.status.error_code() == grpc::RESOURCE_EXHAUSTED;
    EXPECT_TRUE(r.status.ok()) << i << ": " << r.status.error_message();
  }
  EXPECT_EQ(refused, 0);
}

// Metrics of a tiny model, and a one-thread server on it that records them.
absl::StatusOr<std::unique_ptr<ServiceMetrics>> TinyMetrics() {
  MetricsOptions mo;
  mo.model_name = "tiny";
  return ServiceMetrics::Create(mo);
}
ServerOptions OptionsWithMetrics(const char* model_file, ServiceMetrics* metrics) {
  ServerOptions o;
  o.model_path = TestModelPath(model_file);
  o.listen = "127.0.0.1:0";
  o.plan.threads = 1;
  o.metrics = metrics;
  return o;
}

// Under load, every call whose client saw DEADLINE_EXCEEDED is counted as a
// deadline (not a cancel) in the metrics, and every cancel as a cancel.
TEST_F(ServerContractTest, MetricsTellDeadlinesFromCancels) {
  auto metrics = TinyMetrics();
  ASSERT_TRUE(metrics.ok());
  ServerOptions o = OptionsWithMetrics(kLlada, metrics->get());
  o.engine.max_running = 4;
  o.engine.max_queue = 32;
  auto server = DllmServer::Start(*model_, o);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->WaitReady(std::chrono::seconds(60)).ok());
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal((*server)->port()));
  constexpr int kCalls = 24;
  std::vector<grpc::StatusCode> codes(kCalls);
  std::vector<std::thread> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.emplace_back([&, i] {
      if (i % 3 == 0) {  // cancelled by the client after its first event
        codes[i] =
            Generate(*stub, LongRequest(), std::chrono::milliseconds(0),
                     [](grpc::ClientContext* ctx, const v1::GenerateEvent&) { ctx->TryCancel(); })
                .status.error_code();
      } else {  // deadlines that pass while queued or while running
        codes[i] = Generate(*stub, LongRequest(), std::chrono::milliseconds(50 + 40 * i))
                       .status.error_code();
      }
    });
  }
  for (std::thread& t : calls) t.join();
  ASSERT_TRUE((*server)->worker().WaitIdle(std::chrono::seconds(30)));
  const int deadlines =
      static_cast<int>(std::count(codes.begin(), codes.end(), grpc::DEADLINE_EXCEEDED));
  const int cancels = static_cast<int>(std::count(codes.begin(), codes.end(), grpc::CANCELLED));
  EXPECT_EQ(deadlines + cancels, kCalls);
  const std::string text = (*metrics)->Serialize();
  const auto series = [&](const std::string& labels) {
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (absl::StartsWith(line, "dllm_requests_total{") && absl::StrContains(line, labels)) {
        return std::stoi(std::string(line.substr(line.rfind(' ') + 1)));
      }
    }
    return -1;
  };
  EXPECT_EQ(series("code=\"DEADLINE_EXCEEDED\",rpc=\"Generate\""), deadlines) << text;
  EXPECT_EQ(series("code=\"CANCELLED\",rpc=\"Generate\""), cancels) << text;
}

// Issue #35: under batching, each request's step reported the batch's
// forward as its own: dllm_forward_rows recorded the batch's rows once per
// member, and dllm_op_duration_seconds grew once per member per forward.
// Now each request records its own rows, and a forward's op times are
// recorded once.
TEST_F(ServerContractTest, BatchedRequestsEachReportTheirOwnRows) {
  auto metrics = TinyMetrics();
  ASSERT_TRUE(metrics.ok());
  ServerOptions o = OptionsWithMetrics(kLlada, metrics->get());
  o.engine.max_running = 2;
  o.engine.max_batch_requests = 2;
  o.engine.warm_up = false;
  auto server = DllmServer::Start(*model_, o);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->WaitReady(std::chrono::seconds(60)).ok());
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal((*server)->port()));
  // Two requests of different canvases, exact decoding (every forward
  // computes the whole canvas), admitted together so their steps share
  // forwards.
  std::vector<v1::GenerateRequest> requests = {Request("one two three", 32, 32, 32),
                                               Request("a", 64, 32, 64)};
  for (auto& r : requests) r.mutable_diffusion()->set_early_exit(false);
  std::vector<CallResult> results(requests.size());
  std::vector<std::thread> calls;
  for (size_t i = 0; i < requests.size(); ++i) {
    calls.emplace_back([&, i] { results[i] = Generate(*stub, requests[i]); });
  }
  for (std::thread& t : calls) t.join();
  ASSERT_TRUE((*server)->worker().WaitIdle(std::chrono::seconds(30)));
  double own_rows = 0;
  for (const CallResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ASSERT_NE(r.final(), nullptr);
    const v1::Usage& u = r.final()->usage();
    own_rows += static_cast<double>(u.canvas_tokens()) * u.forward_passes();
  }
  const std::string text = (*metrics)->Serialize();
  using ::dllm::testing::SumOfSamples;
  const double forwards = SumOfSamples(text, "dllm_batch_requests_count");
  const double members = SumOfSamples(text, "dllm_batch_requests_sum");
  ASSERT_GT(members, forwards) << "the two requests never shared a forward:\n" << text;
  EXPECT_EQ(SumOfSamples(text, "dllm_forward_rows_sum"), own_rows) << text;
  EXPECT_EQ(SumOfSamples(text, "dllm_forward_rows_sum"), SumOfSamples(text, "dllm_batch_rows_sum"));
  EXPECT_EQ(SumOfSamples(text, "dllm_op_duration_seconds_count", {{"op", "attention"}}), forwards);
  EXPECT_EQ(SumOfSamples(text, "dllm_forward_duration_seconds_count"), forwards);
}

TEST_F(ServerContractTest, DeadlineExceeded) {
  WaitEngineIdle();
  const CallResult running = Generate(*stub_, LongRequest(), std::chrono::milliseconds(300));
  EXPECT_EQ(running.status.error_code(), grpc::DEADLINE_EXCEEDED);
  WaitEngineIdle();

  // A request whose deadline passes while it waits behind a long one.
  grpc::ClientContext long_ctx;
  std::thread long_call([&] {
    auto reader = stub_->Generate(&long_ctx, LongRequest());
    v1::GenerateEvent e;
    while (reader->Read(&e)) {
    }
    reader->Finish();
  });
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return server_->worker().load().running > 0; }));
  const CallResult queued =
      Generate(*stub_, Request("queued", 32, 32, 32), std::chrono::milliseconds(200));
  EXPECT_EQ(queued.status.error_code(), grpc::DEADLINE_EXCEEDED);
  long_ctx.TryCancel();
  long_call.join();
  WaitEngineIdle();
}

TEST_F(ServerContractTest, ConcurrentStreamsAreEachCorrect) {
  EngineOptions engine;
  engine.max_running = 3;
  engine.max_queue = 4;
  auto server = StartTestServer(*model_, kLlada, {.engine = engine});
  ASSERT_NE(server, nullptr);
  auto stub = v1::DiffusionLM::NewStub(ConnectLocal(server->port()));
  constexpr int kStreams = 5;
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < kStreams; ++i) {
    v1::GenerateRequest req = Request("stream " + std::to_string(i), 32, 16, 16);
    req.mutable_sampling()->set_temperature(0.8f);
    req.mutable_sampling()->set_seed(100 + i);
    req.mutable_stream()->set_detail(i % 2 ? v1::DETAIL_STEPS : v1::DETAIL_TEXT);
    requests.push_back(req);
  }
  std::vector<CallResult> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] { results[i] = Generate(*stub, requests[i]); });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    ExpectWellFormed(results[i]);
    const Reference ref = RunReference(*model_, kLlada, requests[i]);
    EXPECT_EQ(Ids(results[i].final()->token_ids()), ref.tokens);
    EXPECT_EQ(results[i].Deltas(), results[i].final()->text());
  }
}

TEST_F(ServerContractTest, InfoAndTokenize) {
  grpc::ClientContext c1;
  v1::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&c1, {}, &info).ok());
  EXPECT_EQ(info.architecture(), "llada");
  EXPECT_EQ(info.vocab_size(), 8256u);
  EXPECT_EQ(info.mask_token_id(), 8194u);
  EXPECT_EQ(info.max_context(), 1024u);
  EXPECT_EQ(info.weight_format(), "Q4_K");
  EXPECT_GT(info.eos_token_ids_size(), 0);
  EXPECT_EQ(info.default_diffusion().block_length(), 32u);

  grpc::ClientContext c2;
  v1::ServerInfo server_info;
  ASSERT_TRUE(stub_->GetServerInfo(&c2, {}, &server_info).ok());
  EXPECT_EQ(server_info.engine_threads(), 1u);
  EXPECT_EQ(server_info.max_running(), 1u);
  EXPECT_EQ(server_info.max_batch_requests(), 8u);
  // The default row budget: twice the context of 1024, a CFG pair of the longest canvas.
  EXPECT_EQ(server_info.max_batch_rows(), 2048u);
  EXPECT_FALSE(server_info.draining());

  grpc::ClientContext c3;
  v1::TokenizeRequest tr;
  tr.set_text("The capital of France is");
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(stub_->Tokenize(&c3, tr, &tokens).ok());
  EXPECT_EQ(Ids(tokens.ids()), (*model_)->tokenizer().Encode(tr.text(), true, true));
  EXPECT_EQ(tokens.pieces_size(), tokens.ids_size());

  grpc::ClientContext c4;
  tr.set_text("\xc3");
  EXPECT_FALSE(stub_->Tokenize(&c4, tr, &tokens).ok());  // protobuf refuses invalid UTF-8
}

// The Tokenize RPC gives llama.cpp's ids (the ones `dllm tokenize` is held to
// in tokenize_command_test): ids_cli by default, ids_plain with no_special.
TEST_F(ServerContractTest, TokenizeGivesLlamaCppsIds) {
  auto golden = ReadJsonFile(testing::TestDataDir() + "/tokenizer/llamacpp.gpt2-trunc8192.json");
  ASSERT_TRUE(golden.ok()) << golden.status();
  for (const Json& item : (*golden)["items"]) {
    const std::string& text = item["text"].get<std::string>();
    if (text.empty()) continue;  // proto3 cannot tell "" from unset; covered below
    SCOPED_TRACE(text);
    for (const bool plain : {false, true}) {
      grpc::ClientContext ctx;
      v1::TokenizeRequest tr;
      tr.set_text(text);
      tr.set_no_special(plain);
      v1::TokenizeResponse tokens;
      ASSERT_TRUE(stub_->Tokenize(&ctx, tr, &tokens).ok());
      std::vector<int32_t> want;
      for (const Json& id : item[plain ? "ids_plain" : "ids_cli"]) {
        want.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
      EXPECT_EQ(Ids(tokens.ids()), want);
    }
  }
  grpc::ClientContext ctx;
  v1::TokenizeRequest tr;
  tr.set_text("hi");
  tr.set_no_special(true);
  tr.set_apply_chat_template(true);
  v1::TokenizeResponse tokens;
  const grpc::Status s = stub_->Tokenize(&ctx, tr, &tokens);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("no_special"), std::string::npos) << s.error_message();
}

// Prompt.chat_template / TokenizeRequest.chat_template: another family's
// format for one request; a bad name is INVALID_ARGUMENT naming the field.
TEST_F(ServerContractTest, RequestsMayNameAChatTemplate) {
  const BpeTokenizer& tok = (*model_)->tokenizer();
  for (const char* name : {"llada-moe", "dream", "llada"}) {
    SCOPED_TRACE(name);
    grpc::ClientContext ctx;
    v1::TokenizeRequest tr;
    tr.set_text("Name a prime.");
    tr.set_apply_chat_template(true);
    tr.set_system("Be brief.");
    tr.set_chat_template(name);
    v1::TokenizeResponse tokens;
    ASSERT_TRUE(stub_->Tokenize(&ctx, tr, &tokens).ok());
    PromptEncoding how;
    how.chat = true;
    how.system = "Be brief.";
    EXPECT_EQ(Ids(tokens.ids()), EncodePrompt(tok, *ParseChatTemplate(name), tr.text(), how));
  }
  v1::GenerateRequest req;
  req.mutable_prompt()->set_text("hi");
  req.mutable_prompt()->set_apply_chat_template(true);
  req.mutable_prompt()->set_chat_template("jinja2");
  const CallResult bad = Generate(*stub_, req);
  EXPECT_EQ(bad.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(
      bad.status.error_message().find("prompt.chat_template: chat template 'jinja2' is not one of"),
      std::string::npos)
      << bad.status.error_message();
  req.mutable_prompt()->set_apply_chat_template(false);
  req.mutable_prompt()->set_chat_template("dream");
  const CallResult unused = Generate(*stub_, req);
  EXPECT_EQ(unused.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(unused.status.error_message().find("needs apply_chat_template"), std::string::npos);
}

// Sends `bytes` as the request of `method` ("/dllm.v1.DiffusionLM/Generate")
// with gRPC's generic API, reads whatever comes back, and returns the status.
grpc::Status RawCall(grpc::Channel* channel, const std::string& method, const std::string& bytes) {
  grpc::GenericStub stub(channel->shared_from_this());
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto call = stub.PrepareCall(&ctx, method, &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  call->WritesDone(reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer response;
  do {
    call->Read(&response, reinterpret_cast<void*>(4));
    cq.Next(&tag, &ok);
  } while (ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

// Request bytes that do not parse (invalid UTF-8 in a string, a truncated
// varint, a wire type that does not exist, endless groups) are
// INVALID_ARGUMENT naming what could not be read, on every method, and the
// server goes on answering.
TEST_F(ServerContractTest, MalformedRequestBytesAreInvalidArgument) {
  // GenerateRequest.prompt (3) { Prompt.text (1) = "hi\xff" }
  const std::string bad_utf8 = std::string("\x1a\x05\x0a\x03hi\xff", 7);
  std::string groups;
  for (int i = 0; i < 10000; ++i) groups += "\xe3\x03";  // field 60, start group
  struct Case {
    const char* method;
    std::string bytes;
    const char* message;
  };
  const Case cases[] = {
      {"Generate", bad_utf8, "dllm.v1.GenerateRequest: prompt.text: invalid UTF-8"},
      {"Generate", std::string("\x20\x80", 2), "truncated varint"},
      {"Generate", std::string("\x27", 1), "wire type 7 does not exist"},
      {"Generate", groups, "nested deeper than 32 levels"},
      {"Tokenize", std::string("\x0a\x01\xc3", 3), "dllm.v1.TokenizeRequest: text: invalid UTF-8"},
      {"GetModelInfo", std::string("\x08\x80", 2), "truncated varint"},
      {"Step", std::string("\x08", 1), "dllm.v1.StepRequest: seq: truncated varint"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.method) + " " + c.message);
    const grpc::Status s =
        RawCall(channel_.get(), std::string("/dllm.v1.DiffusionLM/") + c.method, c.bytes);
    EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find(c.message), std::string::npos) << s.error_message();
  }
  grpc::ClientContext ctx;
  v1::ModelInfo info;
  EXPECT_TRUE(stub_->GetModelInfo(&ctx, {}, &info).ok());
}

// A prompt too long for the context is refused by its length, before it is
// tokenized: only that byte bound gives this message (a tokenized prompt is
// refused by its token count). No timing here: the ASan run took 0.22 s to
// move the 3.9 MB request, more than a bound on the check itself allows.
// Tokenize's own limit keeps its reply under the message limit.
TEST_F(ServerContractTest, OversizedTextIsRefusedBeforeTokenizing) {
  v1::GenerateRequest req;
  req.mutable_prompt()->set_text(std::string(3900000, 'a'));
  const CallResult r = Generate(*stub_, req);
  EXPECT_EQ(r.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("prompt.text: 3900000 bytes cannot fit the model's "
                                          "context of 1024 tokens"),
            std::string::npos)
      << r.status.error_message();
  grpc::ClientContext ctx;
  v1::TokenizeRequest tr;
  tr.set_text(std::string(3900000, 'a'));
  v1::TokenizeResponse tokens;
  const grpc::Status t = stub_->Tokenize(&ctx, tr, &tokens);
  EXPECT_EQ(t.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(t.error_message().find("bytes exceed Tokenize's limit of 524288"), std::string::npos)
      << t.error_message();
  // At the limit the reply fits (every byte its own token here).
  grpc::ClientContext ctx2;
  tr.set_text(std::string(512 << 10, '\x01'));
  EXPECT_TRUE(stub_->Tokenize(&ctx2, tr, &tokens).ok());
}

// ServerOptions::max_message_bytes (4 MiB): a larger request is refused by
// gRPC itself, and the server keeps answering.
TEST_F(ServerContractTest, MessagesOverTheSizeLimitAreRefused) {
  grpc::ClientContext c1;
  v1::TokenizeRequest tr;
  tr.set_text(std::string(5 << 20, 'a'));
  v1::TokenizeResponse tokens;
  const grpc::Status s = stub_->Tokenize(&c1, tr, &tokens);
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED) << s.error_message();

  grpc::ClientContext c2;
  v1::ModelInfo info;
  EXPECT_TRUE(stub_->GetModelInfo(&c2, {}, &info).ok());
}

TEST_F(ServerContractTest, HealthAndReflection) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const char* name : {"", kReadinessService}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(name);
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING) << name;
  }

  auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(channel_);
  grpc::ClientContext ctx;
  auto stream = reflection->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(stream->Write(req));
  stream->WritesDone();
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::set<std::string> services;
  for (const auto& s : resp.list_services_response().service()) services.insert(s.name());
  EXPECT_EQ(services.count("dllm.v1.DiffusionLM"), 1u);
  EXPECT_EQ(services.count("grpc.health.v1.Health"), 1u);
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServerContractTest, ReadinessTurnsServingAfterWarmUp) {
  ServerOptions o;
  o.model_path = TestModelPath(kLlada);
  o.listen = "127.0.0.1:0";
  o.plan.threads = 1;
  auto server = DllmServer::Start(*model_, o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto health = grpc::health::v1::Health::NewStub(ConnectLocal((*server)->port()));
  // Polled from the moment the port is open: NOT_SERVING until the warm-up
  // step ran (seen only if the probe wins the race), then SERVING for good.
  std::vector<int> seen;
  for (int i = 0; i < 5000; ++i) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(kReadinessService);
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
    if (seen.empty() || seen.back() != resp.status()) seen.push_back(resp.status());
    if (resp.status() == grpc::health::v1::HealthCheckResponse::SERVING) break;
  }
  std::printf("[ health ] readiness seen: %s\n",
              seen.size() == 2 ? "NOT_SERVING then SERVING" : "SERVING (warm-up won the race)");
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_LE(seen.size(), 2u);
}

TEST_F(ServerContractTest, DrainFinishesInFlightAndRefusesNew) {
  auto server = StartTestServer(*model_, kLlada);
  ASSERT_NE(server, nullptr);
  auto channel = ConnectLocal(server->port());
  auto stub = v1::DiffusionLM::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);
  const auto readiness = [&] {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(kReadinessService);
    grpc::health::v1::HealthCheckResponse resp;
    EXPECT_TRUE(health->Check(&ctx, req, &resp).ok());
    return resp.status();
  };
  EXPECT_EQ(readiness(), grpc::health::v1::HealthCheckResponse::SERVING);

  // An in-flight stream of a few hundred steps; drain starts once it runs.
  v1::GenerateRequest req = Request("in flight", 128, 64, 128);
  req.mutable_diffusion()->set_early_exit(false);
  std::atomic<bool> started{false};
  CallResult in_flight;
  std::thread call([&] {
    in_flight = Generate(*stub, req, std::chrono::milliseconds(0),
                         [&](grpc::ClientContext*, const v1::GenerateEvent& e) {
                           if (e.has_started()) started = true;
                         });
  });
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return started.load(); }));
  std::thread drain([&] { server->Drain(std::chrono::seconds(60)); });
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return server->admission().draining(); }));
  EXPECT_EQ(readiness(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  const CallResult refused = Generate(*stub, Request("new", 32, 32, 32));
  EXPECT_EQ(refused.status.error_code(), grpc::UNAVAILABLE);
  EXPECT_NE(refused.status.error_message().find("server is draining"), std::string::npos);
  call.join();
  drain.join();
  ExpectWellFormed(in_flight);
  EXPECT_EQ(in_flight.final()->usage().steps(), 64u);
}

TEST_F(ServerContractTest, Tls) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl";
  const std::string dir = testing::TempDir();
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto server = StartTestServer(*model_, kLlada, {.tls_cert_file = cert, .tls_key_file = key});
  ASSERT_NE(server, nullptr);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = testing::ReadFileOrDie(cert);
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server->port()),
                                           grpc::SslCredentials(ssl), args);
  auto stub = v1::DiffusionLM::NewStub(channel);
  ExpectWellFormed(Generate(*stub, Request("secure", 32, 32, 32)));
  // A plaintext client cannot talk to it.
  auto plain = v1::DiffusionLM::NewStub(ConnectLocal(server->port()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ModelInfo info;
  EXPECT_FALSE(plain->GetModelInfo(&ctx, {}, &info).ok());
}

}  // namespace
}  // namespace dllm
