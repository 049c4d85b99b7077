// Batch invariance: a request's tokens and every step's logits are the same
// bits whether the engine runs its steps alone or stacked with other
// requests' in one forward, whatever the batch size (1-8), the admission
// order, the row budget that splits the batch, or a neighbour cancelled
// mid-run; for LLaDA (CFG pairs, threshold, random remasking), Dream and
// LLaDA-MoE requests of different prompt and gen lengths, seeds and cache
// modes, and DiffusionGemma's entropy-bound requests (one to three
// canvases, exact cache or none) beside its masked stand-in, on every ISA
// path this CPU has. The jobs below drive real
// DenoiseSessions through the real EngineWorker and its one ForwardPass,
// the way GenerateJob does, and fingerprint what each step read.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/model.h"
#include "engine/session/denoise_session.h"
#include "engine/synth/synthetic_model.h"
#include "gtest/gtest.h"
#include "kernels/cpu_features.h"
#include "service/engine/engine_worker.h"
#include "service/metrics/service_metrics.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/wait.h"

namespace dllm {
namespace {

struct RequestCase {
  std::string name;
  SamplerConfig config;
  CachingOptions caching;
  std::vector<int32_t> prompt;
  // DiffusionGemma's entropy-bound sampler instead of `config`, when set.
  std::optional<EntropyBoundConfig> entropy_bound;
  CanvasRun run;
};

// What a case tweaks: the sampler's settings and the cache, side by side.
struct CaseSettings : SamplerConfig {
  CacheMode cache = CacheMode::kNone;
  int cache_refresh_steps = 0;
};

// What a request did: one fingerprint per step (the rows it read, their
// logits' bytes, its commits), its final canvas and how it ended.
struct Trace {
  std::vector<uint64_t> steps;
  std::vector<int32_t> canvas;
  absl::Status status;
  std::atomic<int> steps_done{0};
  std::atomic<bool> finished{false};
};

// FNV-1a over 8-byte words (the tail byte by byte): any differing bit
// changes it, at a speed that keeps hashing every step's logits cheap.
uint64_t Fnv1a(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// A generation as GenerateJob runs it: a session over the engine's pass,
// one planned step per turn.
class SessionJob : public EngineJob {
 public:
  SessionJob(std::shared_ptr<const Model> model, const RequestCase& c, Trace* trace)
      : model_(std::move(model)), case_(c), trace_(trace) {}

  absl::StatusOr<std::span<const SequenceInput>> Plan(ForwardPass* pass) override {
    if (session_ == nullptr) {
      absl::StatusOr<std::unique_ptr<DenoiseSession>> s =
          case_.entropy_bound
              ? DenoiseSession::Create(model_, *case_.entropy_bound, case_.prompt, case_.run, pass,
                                       case_.caching)
              : DenoiseSession::Create(model_, case_.config, case_.prompt, pass, case_.caching);
      if (!s.ok()) return s.status();
      session_ = std::move(*s);
    }
    return session_->PlanStep(stop_flag());
  }
  absl::StatusOr<bool> Complete(const ForwardStats& forward, double seconds) override {
    absl::StatusOr<StepReport> report = session_->FinishStep(forward, seconds);
    if (!report.ok()) return report.status();
    uint64_t h = 1469598103934665603ull;
    if (report->forward_passes > 0) {
      absl::StatusOr<DenoiseSession::StepLogits> logits = session_->LastStepLogits();
      if (!logits.ok()) return logits.status();
      h = Fnv1a(h, logits->rows.data(), logits->rows.size_bytes());
      h = Fnv1a(h, logits->logits.data(), logits->logits.size_bytes());
    }
    h = Fnv1a(h, report->positions.data(), report->positions.size_bytes());
    h = Fnv1a(h, report->tokens.data(), report->tokens.size_bytes());
    trace_->steps.push_back(h);
    trace_->steps_done.fetch_add(1);
    return !session_->done();
  }
  void Finish(const absl::Status& status) override {
    trace_->status = status;
    if (session_ != nullptr) {
      trace_->canvas.assign(session_->canvas().begin(), session_->canvas().end());
    }
    session_.reset();
    trace_->finished = true;
  }

 private:
  std::shared_ptr<const Model> model_;
  RequestCase case_;
  Trace* trace_;
  std::unique_ptr<DenoiseSession> session_;
};

std::vector<int32_t> Prompt(int length, int seed, const ModelConfig& c) {
  std::vector<int32_t> p(static_cast<size_t>(length));
  for (int i = 0; i < length; ++i) {
    int32_t t = static_cast<int32_t>((977 * (i + 1) + 131 * seed) % c.n_vocab);
    if (t == c.tokens.mask) t = (t + 1) % static_cast<int32_t>(c.n_vocab);
    p[static_cast<size_t>(i)] = t;
  }
  return p;
}

// Eight requests of the model's family: different prompt and gen lengths,
// seeds and cache modes (LLaDA adds CFG pairs, threshold and random
// remasking; Dream its algorithms and nucleus sampling).
std::vector<RequestCase> Cases(const ModelConfig& c) {
  std::vector<RequestCase> out;
  const auto add = [&](std::string name, int prompt_len, int gen, auto tweak) {
    CaseSettings s;
    static_cast<SamplerConfig&>(s) = DefaultSamplerConfig(c, gen);
    s.early_exit = false;
    if (c.block_length > 0) s.cache = CacheMode::kExact;  // LLaDA2's default
    tweak(s);
    out.push_back({std::move(name), s, CachingOptions{s.cache, s.cache_refresh_steps},
                   Prompt(prompt_len, static_cast<int>(out.size()), c)});
  };
  if (c.canvas_length > 0) {
    // DiffusionGemma: its own sampler over one to three canvases, with the
    // exact cache and without, prompts inside and past the sliding window;
    // beside them the masked stand-in, so both kinds share forwards.
    const auto eb = [&](std::string name, int prompt_len, int canvases, uint32_t seed,
                        CacheMode cache) {
      RequestCase r;
      r.name = std::move(name);
      r.config = DefaultSamplerConfig(c.arch, c.canvas_length);
      r.caching.cache = cache;
      r.prompt = Prompt(prompt_len, static_cast<int>(out.size()), c);
      EntropyBoundConfig e;
      e.canvas_length = c.canvas_length;
      e.max_steps = 6 + static_cast<int>(out.size());
      e.seed = seed;
      r.entropy_bound = e;
      r.run.max_canvases = canvases;
      r.config.gen_length = canvases * c.canvas_length;
      out.push_back(std::move(r));
    };
    eb("eb-exact", 5, 1, 1, CacheMode::kExact);
    eb("eb-3-canvases", 12, 3, 3, CacheMode::kExact);
    eb("eb-uncached", 3, 2, 5, CacheMode::kNone);
    add("masked", 9, 16, [](CaseSettings& s) { s.steps = 8, s.block_length = 16; });
    eb("eb-long-prompt", 40, 2, 7, CacheMode::kExact);
    add("masked-dual", 7, 16,
        [](CaseSettings& s) { s.steps = 8, s.block_length = 8, s.cache = CacheMode::kDual; });
    eb("eb-2-canvases", 4, 2, 11, CacheMode::kExact);
    add("masked-threshold", 15, 16, [](CaseSettings& s) {
      s.steps = 16, s.block_length = 16, s.threshold = 0.3f, s.algorithm = Algorithm::kMaskgitPlus;
    });
    return out;
  }
  if (c.block_length > 0) {
    // LLaDA2: 2.0's threshold-or-schedule and 2.1's editing requests, with
    // the exact block cache and without, blocks of 32 and 8, prompts
    // inside and across a block, greedy and sampled.
    add("2.0-exact", 5, 40, [](CaseSettings&) {});
    add("2.0-uncached-b8", 12, 24, [](CaseSettings& s) {
      s.block_length = 8, s.steps_per_block = 4, s.threshold = 0.5f, s.cache = CacheMode::kNone;
    });
    add("2.1-Q", 9, 32, [](CaseSettings& s) {
      s.threshold = 0.7f, s.editing_threshold = 0.5f, s.max_post_steps = 3;
    });
    add("2.0-sampled", 40, 16, [](CaseSettings& s) {
      s.threshold = 0.5f, s.temperature = 0.8f, s.top_k = 20, s.top_p = 0.9f, s.seed = 3;
    });
    add("2.1-S-uncached", 3, 24, [](CaseSettings& s) {
      s.threshold = 0.5f, s.editing_threshold = 0.0f, s.max_post_steps = 2,
      s.cache = CacheMode::kNone;
    });
    add("2.0-schedule", 20, 32,
        [](CaseSettings& s) { s.threshold.reset(), s.steps_per_block = 8; });
    add("2.1-sampled-b8", 7, 16, [](CaseSettings& s) {
      s.block_length = 8, s.threshold = 0.6f, s.editing_threshold = 0.3f, s.temperature = 0.7f,
      s.seed = 5;
    });
    add("2.0-long", 33, 48, [](CaseSettings& s) { s.threshold = 0.5f, s.steps_per_block = 16; });
  } else if (SamplerFamilyOf(c.arch) == SamplerFamily::kLlada) {
    add("exact", 5, 16, [](CaseSettings& s) { s.steps = 16, s.block_length = 8; });
    add("dual-gumbel", 12, 32, [](CaseSettings& s) {
      s.steps = 16, s.block_length = 16, s.cache = CacheMode::kDual, s.temperature = 0.7f,
      s.seed = 3;
    });
    add("prefix", 3, 24,
        [](CaseSettings& s) { s.steps = 12, s.block_length = 8, s.cache = CacheMode::kPrefix; });
    add("cfg", 9, 16,
        [](CaseSettings& s) { s.steps = 8, s.block_length = 16, s.cfg_scale = 1.5f; });
    add("threshold-dual", 20, 32, [](CaseSettings& s) {
      s.steps = 32, s.block_length = 16, s.cache = CacheMode::kDual, s.threshold = 0.3f;
    });
    add("random", 7, 8, [](CaseSettings& s) {
      s.steps = 8, s.block_length = 8, s.algorithm = Algorithm::kRandom, s.seed = 7;
    });
    add("cfg-dual", 4, 16, [](CaseSettings& s) {
      s.steps = 16, s.block_length = 8, s.cfg_scale = 1.0f, s.cache = CacheMode::kDual;
    });
    add("prefix-refresh", 15, 40, [](CaseSettings& s) {
      s.steps = 20, s.block_length = 8, s.cache = CacheMode::kPrefix, s.cache_refresh_steps = 2;
    });
  } else {
    add("exact", 5, 16, [](CaseSettings& s) { s.steps = 16; });
    add("dual-sampled", 12, 32, [](CaseSettings& s) {
      s.steps = 16, s.cache = CacheMode::kDual, s.temperature = 0.6f, s.top_p = 0.9f, s.seed = 3;
    });
    add("prefix-maskgit", 3, 24, [](CaseSettings& s) {
      s.steps = 12, s.cache = CacheMode::kPrefix, s.algorithm = Algorithm::kMaskgitPlus;
    });
    add("margin", 9, 16,
        [](CaseSettings& s) { s.steps = 8, s.algorithm = Algorithm::kTopkMargin; });
    add("threshold-dual", 20, 32, [](CaseSettings& s) {
      s.steps = 32, s.cache = CacheMode::kDual, s.threshold = 0.3f,
      s.algorithm = Algorithm::kMaskgitPlus;
    });
    add("origin", 7, 8, [](CaseSettings& s) {
      s.steps = 8, s.algorithm = Algorithm::kOrigin, s.temperature = 0.5f, s.seed = 7;
    });
    add("blocks-dual", 4, 16,
        [](CaseSettings& s) { s.steps = 16, s.block_length = 8, s.cache = CacheMode::kDual; });
    add("prefix-refresh", 15, 40, [](CaseSettings& s) {
      s.steps = 20, s.cache = CacheMode::kPrefix, s.cache_refresh_steps = 2;
    });
  }
  for (const RequestCase& r : out) {
    EXPECT_TRUE(r.config.ValidateForCanvas(static_cast<int>(r.prompt.size()), c.n_ctx_train).ok())
        << r.name << ": "
        << r.config.ValidateForCanvas(static_cast<int>(r.prompt.size()), c.n_ctx_train);
  }
  return out;
}

// A sample's value in Prometheus text ("NAME{...} VALUE" or "NAME VALUE").
double Sample(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    if (at > 0 && text[at - 1] != '\n') continue;
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    if (line.size() > name.size() && (line[name.size()] == ' ' || line[name.size()] == '{')) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
}

struct RunOptions {
  int batch_requests = 1;
  int batch_rows = 0;         // 0: the default
  std::vector<size_t> order;  // admission order
  int cancel = -1;            // this request is cancelled once it has run `cancel_after` steps
  int cancel_after = 2;
};

// Runs every case through one worker (all admitted at once, in `order`)
// and returns their traces, by case; `requests_per_forward` (when set)
// gets the mean number of requests the worker's forwards ran together.
std::vector<std::unique_ptr<Trace>> RunAll(const std::shared_ptr<const Model>& model,
                                           const std::vector<RequestCase>& cases,
                                           const RunOptions& o,
                                           double* requests_per_forward = nullptr) {
  MetricsOptions mo;
  absl::StatusOr<std::unique_ptr<ServiceMetrics>> metrics = ServiceMetrics::Create(mo);
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  EngineOptions options;
  options.max_running = static_cast<int>(cases.size());
  options.max_queue = 0;
  options.max_batch_requests = o.batch_requests;
  options.max_batch_rows = o.batch_rows;
  options.warm_up = false;
  ThreadPlan plan;
  plan.threads = 2;
  const auto t0 = std::chrono::steady_clock::now();
  EngineWorker worker(model, plan, options, metrics->get());
  worker.Start();
  EXPECT_TRUE(testing::WaitUntil([&] { return worker.ready(); }));
  std::vector<std::unique_ptr<Trace>> traces(cases.size());
  std::vector<std::shared_ptr<SessionJob>> jobs(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    traces[i] = std::make_unique<Trace>();
    jobs[i] = std::make_shared<SessionJob>(model, cases[i], traces[i].get());
  }
  std::vector<size_t> order = o.order;
  if (order.empty()) {
    for (size_t i = 0; i < cases.size(); ++i) order.push_back(i);
  }
  for (size_t i : order) {
    const RequestCase& c = cases[i];
    const int prompt = static_cast<int>(c.prompt.size());
    const EngineWorker::Reservation r =
        c.entropy_bound ? EngineWorker::Reservation{DenoiseSession::EntropyBoundStateBytes(
                                                        model->config(), *c.entropy_bound, prompt,
                                                        c.run, c.caching),
                                                    DenoiseSession::EntropyBoundLimits(
                                                        *c.entropy_bound, prompt, c.run, c.caching)
                                                        .max_rows}
                        : EngineWorker::ReservationFor(model->config(), c.config, c.caching,
                                                       prompt + c.config.gen_length);
    EXPECT_TRUE(worker.Submit(jobs[i], r).ok()) << c.name;
  }
  std::thread canceller;
  if (o.cancel >= 0) {
    canceller = std::thread([&] {
      Trace& t = *traces[static_cast<size_t>(o.cancel)];
      testing::WaitUntil(
          [&] { return t.steps_done.load() >= o.cancel_after || t.finished.load(); });
      jobs[static_cast<size_t>(o.cancel)]->Cancel();
    });
  }
  for (const auto& t : traces) {
    EXPECT_TRUE(testing::WaitUntil([&] { return t->finished.load(); }, std::chrono::seconds(300)));
  }
  if (canceller.joinable()) canceller.join();
  worker.Stop();
  if (requests_per_forward != nullptr) {
    const std::string text = (*metrics)->Serialize();
    *requests_per_forward =
        Sample(text, "dllm_batch_requests_sum") / Sample(text, "dllm_batch_requests_count");
  }
  std::printf("  batches of %d, %d rows: %.2f s\n", o.batch_requests,
              worker.options().max_batch_rows,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return traces;
}

void ExpectSameAs(const std::vector<std::unique_ptr<Trace>>& alone,
                  const std::vector<std::unique_ptr<Trace>>& batched,
                  const std::vector<RequestCase>& cases, int skip = -1) {
  for (size_t i = 0; i < cases.size(); ++i) {
    if (static_cast<int>(i) == skip) continue;
    SCOPED_TRACE(cases[i].name);
    ASSERT_TRUE(alone[i]->status.ok()) << alone[i]->status;
    EXPECT_TRUE(batched[i]->status.ok()) << batched[i]->status;
    EXPECT_EQ(batched[i]->canvas, alone[i]->canvas);
    ASSERT_EQ(batched[i]->steps.size(), alone[i]->steps.size());
    for (size_t s = 0; s < alone[i]->steps.size(); ++s) {
      EXPECT_EQ(batched[i]->steps[s], alone[i]->steps[s]) << "step " << s;
    }
  }
}

struct ModelCase {
  std::string name;
  std::string path;  // empty: synthesized (LLaDA-MoE)
};

std::string MoePath() {
  static const std::string path = [] {
    const std::string p = testing::TempDir() + "/batch-invariance-llada-moe-q4_k_m.gguf";
    absl::StatusOr<SyntheticShape> shape = SyntheticShapeFor(Arch::kLladaMoe, "tiny");
    EXPECT_TRUE(shape.ok());
    EXPECT_TRUE(WriteSyntheticModel(Arch::kLladaMoe, *shape, QuantPreset::kQ4_K_M, 1, p).ok());
    return p;
  }();
  return path;
}

class BatchInvarianceTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::string Path() const {
    const std::string name = GetParam();
    if (name == "llada-moe") return MoePath();
    if (name == "diffusion-gemma") {
      return testing::TestDataDir() + "/logits-dg/tiny-diffusion-gemma-q8_0.gguf";
    }
    if (name == "llada2") return testing::TestDataDir() + "/llada2/tiny-llada2-q8_0.gguf";
    return testing::TestDataDir() + "/models/" + name + ".gguf";
  }
};

TEST_P(BatchInvarianceTest, TokensAndLogitsDoNotDependOnTheBatch) {
  for (IsaLevel isa : SupportedIsaLevels()) {
    SCOPED_TRACE(IsaLevelName(isa));
    absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(Path(), {isa});
    ASSERT_TRUE(model.ok()) << model.status();
    const std::vector<RequestCase> cases = Cases((*model)->config());
    const auto alone = RunAll(*model, cases, {.batch_requests = 1});
    std::vector<size_t> shuffled = {0, 1, 2, 3, 4, 5, 6, 7};
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(static_cast<unsigned>(isa) + 11));
    {
      // The longest canvas is 55 rows (110 under CFG): 120 rows split the
      // eight requests over several forwards, differently every turn.
      SCOPED_TRACE("shuffled admission, a row budget of 120");
      ExpectSameAs(
          alone, RunAll(*model, cases, {.batch_requests = 8, .batch_rows = 120, .order = shuffled}),
          cases);
    }
    // The scalar kernels are some 30 times slower: one batched run there.
    if (isa == IsaLevel::kScalar) continue;
    for (int k = 2; k <= 8; ++k) {
      SCOPED_TRACE(absl::StrCat("batches of ", k));
      double per_forward = 0;
      ExpectSameAs(alone, RunAll(*model, cases, {.batch_requests = k}, &per_forward), cases);
      // The requests did share forwards (all eight run from the start; the
      // mean falls as the shorter ones end).
      EXPECT_GT(per_forward, 1.5) << "requests per forward";
      EXPECT_LE(per_forward, k);
    }
    {
      SCOPED_TRACE("reversed admission");
      ExpectSameAs(alone,
                   RunAll(*model, cases, {.batch_requests = 8, .order = {7, 6, 5, 4, 3, 2, 1, 0}}),
                   cases);
    }
    {
      SCOPED_TRACE("shuffled admission, batches of 5");
      ExpectSameAs(alone, RunAll(*model, cases, {.batch_requests = 5, .order = shuffled}), cases);
    }
  }
}

// Cancelling one request while it runs in a batch leaves every other
// request's output as it was, and ends the cancelled one CANCELLED.
TEST_P(BatchInvarianceTest, CancellingOneRequestLeavesTheOthersUnchanged) {
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(Path(), {BestIsaLevel()});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<RequestCase> cases = Cases((*model)->config());
  const auto alone = RunAll(*model, cases, {.batch_requests = 1});
  for (int victim : {1, 7}) {
    SCOPED_TRACE(absl::StrCat("cancelling ", cases[static_cast<size_t>(victim)].name));
    const auto batched = RunAll(*model, cases, {.batch_requests = 4, .cancel = victim});
    ExpectSameAs(alone, batched, cases, victim);
    const Trace& t = *batched[static_cast<size_t>(victim)];
    EXPECT_EQ(t.status.code(), absl::StatusCode::kCancelled) << t.status;
    // The steps it ran before the cancel are its solo steps.
    for (size_t s = 0; s < t.steps.size(); ++s) {
      EXPECT_EQ(t.steps[s], alone[static_cast<size_t>(victim)]->steps[s]) << "step " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, BatchInvarianceTest,
                         ::testing::Values("tiny-llada-k-q4_k_m", "tiny-dream-k-q4_k_m",
                                           "llada-moe", "diffusion-gemma", "llada2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace dllm
