// ServiceMetrics: every dllm_* family in one place. Families and all their
// label children are created in Create(), so the first scrape already lists
// every series (at zero) and event methods only touch cached references:
// prometheus-cpp's Counter, Gauge and Histogram are safe to update from any
// thread, and the references stay valid because nothing is ever removed.
#include "service/metrics/service_metrics.h"

#include <array>
#include <exception>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/base/version.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "service/metrics/process_collector.h"

namespace dllm {
namespace {

using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;

// Bucket sets of serving.md 6.2: wide enough that a tiny test model (ms per
// step) and an 8B model on a laptop (seconds per step) both land inside.
const Histogram::BucketBoundaries kStepBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160};
const Histogram::BucketBoundaries kRequestBuckets = {
    0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 2400, 3600};
const Histogram::BucketBoundaries kOpBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                                1,      2.5,     5,      10};
// Fine below 100 ms: a cancel should stop work within one layer.
const Histogram::BucketBoundaries kCancelBuckets = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                                    0.1,    0.25,  0.5,   1,     2.5,  5,    10};
const Histogram::BucketBoundaries kBatchRequestBuckets = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
const Histogram::BucketBoundaries kTokensPerStepBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};
const Histogram::BucketBoundaries kStepsBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
const Histogram::BucketBoundaries kCanvasBuckets = {16,   32,   64,   128,  256,  512,
                                                    1024, 2048, 4096, 8192, 16384};

// Label values, indexed by the enums of service_metrics.h.
// RpcKind order; "Unary": GetModelInfo, GetServerInfo and Tokenize together.
constexpr std::array<const char*, 6> kRpcNames = {
    "Generate", "Step", "Unary", "/v1/completions", "/v1/chat/completions", "/infill"};
// The HTTP paths dllm_http_responses_total tells apart.
constexpr std::array<const char*, 8> kHttpPaths = {
    "/v1/completions", "/v1/chat/completions", "/infill", "/v1/models",
    "/health",         "/health/ready",        "/",       "other"};
constexpr std::array<const char*, 7> kRejectNames = {
    "queue_full", "sessions_full", "invalid", "memory", "draining", "not_ready", "malformed"};
constexpr std::array<const char*, 8> kFinishNames = {"eos",   "length", "cancelled",   "deadline",
                                                     "error", "closed", "unavailable", "stop"};
// gRPC status code names, in code order (google.rpc.Code).
constexpr std::array<const char*, 17> kGrpcCodes = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};
constexpr int kUnknownCode = 2;
// The forward pass's ops (kForwardOps), then the sampler's.
constexpr size_t kSampleOp = kForwardOps.size();
constexpr std::array<const char*, kForwardOps.size() + 1> kOpNames = [] {
  std::array<const char*, kForwardOps.size() + 1> names{};
  for (size_t i = 0; i < kForwardOps.size(); ++i) names[i] = kForwardOps[i].name;
  names[kSampleOp] = "sample";
  return names;
}();

// Index into kGrpcCodes (the canonical code numbers); a value outside them
// counts as UNKNOWN so the label set stays closed.
int CodeIndex(absl::StatusCode code) {
  const int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(kGrpcCodes.size()) ? i : kUnknownCode;
}

std::string OrUnknown(const std::string& s) { return s.empty() ? "unknown" : s; }

// The builders of the series' families, each labelled with the model.
struct Families {
  prometheus::Registry& registry;
  prometheus::Labels model;

  prometheus::Family<Gauge>& gauge(const char* name, const char* help) {
    return prometheus::BuildGauge().Name(name).Help(help).Labels(model).Register(registry);
  }
  prometheus::Family<Counter>& counter(const char* name, const char* help) {
    return prometheus::BuildCounter().Name(name).Help(help).Labels(model).Register(registry);
  }
  prometheus::Family<Histogram>& histogram(const char* name, const char* help) {
    return prometheus::BuildHistogram().Name(name).Help(help).Labels(model).Register(registry);
  }
};

}  // namespace

struct ServiceMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<ProcessCollector> process;

  Gauge* running = nullptr;
  Gauge* waiting = nullptr;
  Gauge* sessions_open = nullptr;
  Gauge* activation_bytes = nullptr;
  Gauge* http_open = nullptr;
  Gauge* http_idle = nullptr;

  std::array<std::array<Counter*, kGrpcCodes.size()>, kRpcNames.size()> requests{};
  std::array<Counter*, kRejectNames.size()> rejected{};
  std::array<Counter*, kFinishNames.size()> finished{};
  std::array<Histogram*, kRpcNames.size()> request_duration{};
  std::array<Counter*, kRpcNames.size()> events_sent{};
  std::array<Counter*, kRpcNames.size()> events_coalesced{};
  std::array<Histogram*, kOpNames.size()> op_duration{};

  Histogram* queue = nullptr;
  Histogram* first_step = nullptr;
  Histogram* first_token = nullptr;
  Histogram* step_duration = nullptr;
  Histogram* forward_duration = nullptr;
  Histogram* committed_per_step = nullptr;
  Histogram* request_steps = nullptr;
  Histogram* canvas_tokens = nullptr;
  Histogram* cancellation = nullptr;
  Histogram* forward_rows = nullptr;
  Histogram* batch_requests = nullptr;
  Histogram* batch_rows = nullptr;
  Histogram* batch_wait = nullptr;
  std::array<Histogram*, 2> cache_step_duration{};  // refill, read
  Counter* cache_refreshes = nullptr;

  Counter* steps = nullptr;
  Counter* forward_passes = nullptr;
  Counter* prompt_tokens = nullptr;
  Counter* generated_tokens = nullptr;

  // HTTP responses by path; status codes are added as they occur.
  prometheus::Family<Counter>* http_responses = nullptr;

  void Build(const MetricsOptions& options);
  // Its parts: the static facts, load and request outcomes, latencies, work done.
  void BuildFacts(const MetricsOptions& options, Families& f);
  void BuildLoadAndOutcomes(Families& f);
  void BuildLatencies(Families& f);
  void BuildWork(Families& f);
};

void ServiceMetrics::Impl::Build(const MetricsOptions& o) {
  Families f{*registry, {{"model", OrUnknown(o.model_name)}}};
  BuildFacts(o, f);
  BuildLoadAndOutcomes(f);
  BuildLatencies(f);
  BuildWork(f);
  process = std::make_shared<ProcessCollector>(OrUnknown(o.model_name));
}

void ServiceMetrics::Impl::BuildFacts(const MetricsOptions& o, Families& f) {
  f.gauge("dllm_build_info", "Always 1; labels describe the build and the loaded model.")
      .Add({{"version", kVersion},
            {"arch", OrUnknown(o.arch)},
            {"weight_format", OrUnknown(o.weight_format)},
            {"isa", OrUnknown(o.isa)},
            {"cpu_policy", OrUnknown(o.cpu_policy)}})
      .Set(1);
  auto& cores = f.gauge("dllm_cpu_cores", "Physical cores usable by this process, by core kind.");
  cores.Add({{"kind", "performance"}}).Set(o.performance_cores);
  cores.Add({{"kind", "efficiency"}}).Set(o.efficiency_cores);
  f.gauge("dllm_engine_threads", "Threads of the engine's compute arena.")
      .Add({})
      .Set(o.engine_threads);
  auto& weights = f.gauge("dllm_model_weights_bytes", "Bytes of model weights, by placement.");
  weights.Add({{"storage", "mmap"}}).Set(static_cast<double>(o.weights_mapped_bytes));
  weights.Add({{"storage", "heap"}}).Set(static_cast<double>(o.weights_repacked_bytes));
  auto& params = f.gauge("dllm_model_parameters",
                         "Layer weights of the model: all of them, and those one token reads "
                         "(MoE: the routed experts only).");
  params.Add({{"kind", "total"}}).Set(static_cast<double>(o.layer_parameters));
  params.Add({{"kind", "active"}}).Set(static_cast<double>(o.active_layer_parameters));
  auto& experts = f.gauge("dllm_model_experts",
                          "Experts per MoE layer, and experts each token is routed to (0: dense).");
  experts.Add({{"kind", "total"}}).Set(o.experts);
  experts.Add({{"kind", "active"}}).Set(o.experts_used);
  activation_bytes = &f.gauge("dllm_activation_buffer_bytes",
                              "Bytes reserved from the memory budget: the engine's forward pass, "
                              "and each admitted request's K/V caches and logits.")
                          .Add({});
  auto& http_connections = f.gauge("dllm_http_connections",
                                   "Connections to the HTTP API: open, and of those idle "
                                   "(waiting for a request).");
  http_open = &http_connections.Add({{"state", "open"}});
  http_idle = &http_connections.Add({{"state", "idle"}});
}

void ServiceMetrics::Impl::BuildLoadAndOutcomes(Families& f) {
  running = &f.gauge("dllm_requests_running", "Requests the engine is denoising now.").Add({});
  waiting = &f.gauge("dllm_requests_waiting", "Admitted requests waiting for the engine.").Add({});
  sessions_open = &f.gauge("dllm_sessions_open", "Open Step sessions.").Add({});

  // Request outcomes.
  auto& requests_family =
      f.counter("dllm_requests_total", "RPCs handled, by RPC and gRPC status code.");
  auto& duration_family = f.histogram("dllm_request_duration_seconds",
                                      "End-to-end request duration in seconds, by RPC.");
  auto& sent_family = f.counter("dllm_stream_events_sent_total", "Stream messages sent, by RPC.");
  auto& coalesced_family = f.counter("dllm_stream_events_coalesced_total",
                                     "Step events merged into a later message for slow readers.");
  for (size_t rpc = 0; rpc < kRpcNames.size(); ++rpc) {
    for (size_t code = 0; code < kGrpcCodes.size(); ++code) {
      requests[rpc][code] =
          &requests_family.Add({{"rpc", kRpcNames[rpc]}, {"code", kGrpcCodes[code]}});
    }
    request_duration[rpc] = &duration_family.Add({{"rpc", kRpcNames[rpc]}}, kRequestBuckets);
    events_sent[rpc] = &sent_family.Add({{"rpc", kRpcNames[rpc]}});
    events_coalesced[rpc] = &coalesced_family.Add({{"rpc", kRpcNames[rpc]}});
  }
  auto& rejected_family =
      f.counter("dllm_requests_rejected_total", "Requests refused before any compute, by reason.");
  for (size_t i = 0; i < kRejectNames.size(); ++i) {
    rejected[i] = &rejected_family.Add({{"reason", kRejectNames[i]}});
  }
  auto& finished_family =
      f.counter("dllm_requests_finished_total", "Requests that ran and ended, by finish reason.");
  for (size_t i = 0; i < kFinishNames.size(); ++i) {
    finished[i] = &finished_family.Add({{"finish_reason", kFinishNames[i]}});
  }
}

void ServiceMetrics::Impl::BuildLatencies(Families& f) {
  queue = &f.histogram("dllm_request_queue_seconds", "Admission to engine start, in seconds.")
               .Add({}, kRequestBuckets);
  first_step = &f.histogram("dllm_time_to_first_step_seconds",
                            "Arrival to the first finished denoising step, in seconds.")
                    .Add({}, kRequestBuckets);
  first_token = &f.histogram("dllm_time_to_first_token_seconds",
                             "Arrival to the first stable text, in seconds.")
                     .Add({}, kRequestBuckets);
  step_duration =
      &f.histogram("dllm_step_duration_seconds", "One denoising step (forward, sampling, commit).")
           .Add({}, kStepBuckets);
  forward_duration =
      &f.histogram("dllm_forward_duration_seconds",
                   "One forward pass of the engine (all the requests it carried), in seconds.")
           .Add({}, kStepBuckets);
  auto& op_family = f.histogram("dllm_op_duration_seconds",
                                "Time in one kind of operation, summed over layers: per forward "
                                "pass for the model's ops, per request step for sample.");
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    op_duration[i] = &op_family.Add({{"op", kOpNames[i]}}, kOpBuckets);
  }
  cancellation =
      &f.histogram("dllm_cancellation_latency_seconds",
                   "Cancel (or the deadline passing) to the engine stopping the request's work, in "
                   "seconds.")
           .Add({}, kCancelBuckets);

  http_responses =
      &f.counter("dllm_http_responses_total",
                 "HTTP responses of the OpenAI-compatible API, by path and status code.");
}

void ServiceMetrics::Impl::BuildWork(Families& f) {
  steps = &f.counter("dllm_steps_total", "Denoising steps run.").Add({});
  forward_passes = &f.counter("dllm_forward_passes_total", "Model forward passes run.").Add({});
  prompt_tokens =
      &f.counter("dllm_prompt_tokens_total", "Prompt tokens of started requests.").Add({});
  generated_tokens =
      &f.counter("dllm_generated_tokens_total", "Output tokens of finished requests.").Add({});
  committed_per_step =
      &f.histogram("dllm_tokens_committed_per_step", "Tokens committed by one denoising step.")
           .Add({}, kTokensPerStepBuckets);
  request_steps =
      &f.histogram("dllm_request_steps", "Denoising steps run per request.").Add({}, kStepsBuckets);
  canvas_tokens =
      &f.histogram("dllm_request_canvas_tokens", "Tokens per forward pass (prompt plus canvas).")
           .Add({}, kCanvasBuckets);
  forward_rows =
      &f.histogram("dllm_forward_rows",
                   "Canvas rows one request's step computed (all its sequences), however "
                   "many requests shared the forward: the canvas for exact decoding, "
                   "fewer for a step read from a K/V cache.")
           .Add({}, kCanvasBuckets);
  batch_requests = &f.histogram("dllm_batch_requests",
                                "Requests (and Step session operations) whose steps one engine "
                                "forward pass ran together.")
                        .Add({}, kBatchRequestBuckets);
  batch_rows = &f.histogram("dllm_batch_rows",
                            "Rows one engine forward pass computed, over every request in it.")
                    .Add({}, kCanvasBuckets);
  batch_wait = &f.histogram("dllm_batch_wait_seconds",
                            "Time a ready step waited for the forward pass it ran in: from its "
                            "previous step's end (or its start) to that pass's start.")
                    .Add({}, kStepBuckets);
  cache_refreshes =
      &f.counter("dllm_cache_refreshes_total",
                 "Steps under a K/V cache that computed the whole canvas and refilled "
                 "the cache (block starts, refreshes, after a stale-making edit).")
           .Add({});
  auto& cache_steps = f.histogram("dllm_cache_step_duration_seconds",
                                  "Steps under a K/V cache, by kind: full (refilled the cache) or "
                                  "cached (computed only some rows), in seconds.");
  cache_step_duration = {
      &cache_steps.Add({{"step", CacheUseName(CacheUse::kRefill)}}, kStepBuckets),
      &cache_steps.Add({{"step", CacheUseName(CacheUse::kRead)}}, kStepBuckets)};
}

absl::StatusOr<std::unique_ptr<ServiceMetrics>> ServiceMetrics::Create(
    const MetricsOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->Build(options);
  return std::unique_ptr<ServiceMetrics>(new ServiceMetrics(std::move(impl)));
}

ServiceMetrics::ServiceMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ServiceMetrics* ServiceMetrics::NoOp() {
  static ServiceMetrics* const no_op = new ServiceMetrics(nullptr);  // never destroyed
  return no_op;
}

ServiceMetrics* ServiceMetrics::OrNoOp(ServiceMetrics* metrics) {
  return metrics != nullptr ? metrics : NoOp();
}
ServiceMetrics::~ServiceMetrics() = default;

std::string ServiceMetrics::Serialize() const {
  if (impl_ == nullptr) return "";
  std::vector<prometheus::MetricFamily> families = impl_->registry->Collect();
  for (prometheus::MetricFamily& f : impl_->process->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

void ServiceMetrics::SetLoad(int running, int waiting, int sessions_open) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->running->Set(running);
  impl_->waiting->Set(waiting);
  impl_->sessions_open->Set(sessions_open);
}

void ServiceMetrics::SetHttpConnections(int open, int idle) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->http_open->Set(open);
  impl_->http_idle->Set(idle);
}

void ServiceMetrics::SetActivationBytes(uint64_t bytes) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->activation_bytes->Set(static_cast<double>(bytes));
}

void ServiceMetrics::OnRejected(RejectReason reason) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->rejected[static_cast<size_t>(reason)]->Increment();
}

void ServiceMetrics::OnRejected(RpcKind rpc, RejectReason reason, absl::StatusCode code) {
  if (impl_ == nullptr) return;  // the no-op object
  OnRejected(reason);
  impl_->requests[static_cast<size_t>(rpc)][CodeIndex(code)]->Increment();
}

void ServiceMetrics::OnStarted(double queue_seconds, int prompt_tokens, int canvas_tokens) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->queue->Observe(queue_seconds);
  impl_->prompt_tokens->Increment(prompt_tokens);
  impl_->canvas_tokens->Observe(canvas_tokens);
}

void ServiceMetrics::OnStep(const StepReport& step) {
  OnStep(step.rows_computed, step.step_seconds, step.sample_seconds, step.forward_passes,
         static_cast<int>(step.positions.size()), step.cache_use);
}

void ServiceMetrics::OnForward(const ForwardStats& ops, double forward_seconds) {
  if (impl_ == nullptr) return;  // the no-op object
  for (size_t i = 0; i < kForwardOps.size(); ++i) {
    impl_->op_duration[i]->Observe(ops.*kForwardOps[i].seconds);
  }
  impl_->forward_duration->Observe(forward_seconds);
}

void ServiceMetrics::OnStep(int64_t rows, double step_seconds, double sample_seconds,
                            int forward_passes, int committed, CacheUse cache) {
  if (impl_ == nullptr) return;  // the no-op object
  if (forward_passes > 0) impl_->forward_rows->Observe(static_cast<double>(rows));
  if (cache == CacheUse::kRefill) {
    impl_->cache_refreshes->Increment();
    impl_->cache_step_duration[0]->Observe(step_seconds);
  } else if (cache == CacheUse::kRead) {
    impl_->cache_step_duration[1]->Observe(step_seconds);
  }
  impl_->op_duration[kSampleOp]->Observe(sample_seconds);  // the request's own
  impl_->step_duration->Observe(step_seconds);
  impl_->steps->Increment();
  impl_->forward_passes->Increment(forward_passes);
  impl_->committed_per_step->Observe(committed);
}

void ServiceMetrics::OnFirstStep(double seconds_since_arrival) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->first_step->Observe(seconds_since_arrival);
}

void ServiceMetrics::OnFirstToken(double seconds_since_arrival) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->first_token->Observe(seconds_since_arrival);
}

void ServiceMetrics::OnFinished(RpcKind rpc, FinishKind finish, absl::StatusCode code,
                                double duration_seconds, int steps, int generated_tokens) {
  if (impl_ == nullptr) return;  // the no-op object
  const size_t r = static_cast<size_t>(rpc);
  impl_->requests[r][CodeIndex(code)]->Increment();
  impl_->finished[static_cast<size_t>(finish)]->Increment();
  impl_->request_duration[r]->Observe(duration_seconds);
  impl_->request_steps->Observe(steps);
  impl_->generated_tokens->Increment(generated_tokens);
}

void ServiceMetrics::OnCallEnded(RpcKind rpc, absl::StatusCode code) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->requests[static_cast<size_t>(rpc)][CodeIndex(code)]->Increment();
}

void ServiceMetrics::OnBatch(int requests, int64_t rows) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->batch_requests->Observe(static_cast<double>(requests));
  impl_->batch_rows->Observe(static_cast<double>(rows));
}

void ServiceMetrics::OnBatchWait(double seconds) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->batch_wait->Observe(seconds);
}

void ServiceMetrics::OnCancelled(double cancel_to_idle_seconds) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->cancellation->Observe(cancel_to_idle_seconds);
}

void ServiceMetrics::OnEventsSent(RpcKind rpc, int sent, int coalesced) {
  if (impl_ == nullptr) return;  // the no-op object
  impl_->events_sent[static_cast<size_t>(rpc)]->Increment(sent);
  impl_->events_coalesced[static_cast<size_t>(rpc)]->Increment(coalesced);
}

void ServiceMetrics::OnHttpResponse(absl::string_view path, int status) {
  if (impl_ == nullptr) return;  // the no-op object
  const char* label = kHttpPaths.back();
  for (const char* known : kHttpPaths) {
    if (path == known) label = known;
  }
  // Family::Add returns the existing counter for labels it has seen.
  impl_->http_responses->Add({{"path", label}, {"status", absl::StrCat(status)}}).Increment();
}

}  // namespace dllm
