// Tests for service/metrics/service_metrics.cc and process_collector.cc: every
// series is present from the start, events move the right series, the HTTP
// endpoint serves the same families, and `promtool check metrics` accepts it.
#include "service/metrics/service_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::FamilyNames;
using ::dllm::testing::IsOk;
using ::dllm::testing::ParseSamples;
using ::dllm::testing::Sample;
using ::dllm::testing::StatusIs;
using Labels = std::map<std::string, std::string>;

// Every family the service promises (README "Metrics").
const std::vector<std::string> kFamilies = {
    "dllm_build_info",
    "dllm_cpu_cores",
    "dllm_engine_threads",
    "dllm_requests_total",
    "dllm_requests_rejected_total",
    "dllm_requests_finished_total",
    "dllm_requests_running",
    "dllm_requests_waiting",
    "dllm_sessions_open",
    "dllm_request_queue_seconds",
    "dllm_time_to_first_step_seconds",
    "dllm_time_to_first_token_seconds",
    "dllm_request_duration_seconds",
    "dllm_step_duration_seconds",
    "dllm_forward_duration_seconds",
    "dllm_op_duration_seconds",
    "dllm_steps_total",
    "dllm_forward_passes_total",
    "dllm_prompt_tokens_total",
    "dllm_generated_tokens_total",
    "dllm_tokens_committed_per_step",
    "dllm_request_steps",
    "dllm_request_canvas_tokens",
    "dllm_forward_rows",
    "dllm_batch_requests",
    "dllm_batch_rows",
    "dllm_batch_wait_seconds",
    "dllm_cache_refreshes_total",
    "dllm_cache_step_duration_seconds",
    "dllm_stream_events_sent_total",
    "dllm_stream_events_coalesced_total",
    "dllm_cancellation_latency_seconds",
    "dllm_model_weights_bytes",
    "dllm_model_parameters",
    "dllm_model_experts",
    "dllm_activation_buffer_bytes",
    "dllm_http_connections",
    "dllm_process_resident_anon_bytes",
    "dllm_process_resident_file_bytes",
    "dllm_process_resident_peak_bytes",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
    "process_threads",
};

// The value of the one sample called `name` whose labels include `labels`;
// fails the test (and returns -1) unless exactly one matches.
double Value(const std::string& text, const std::string& name, const Labels& labels = {}) {
  const std::vector<Sample> matches = ::dllm::testing::MatchingSamples(text, name, labels);
  EXPECT_EQ(matches.size(), 1u) << name;
  return matches.size() == 1 ? matches[0].value : -1;
}

MetricsOptions TestOptions() {
  MetricsOptions o;
  o.model_name = "tiny";
  o.arch = "llada";
  o.weight_format = "Q4_K";
  o.isa = "avx2";
  o.cpu_policy = "auto";
  o.engine_threads = 3;
  o.performance_cores = 4;
  o.efficiency_cores = 2;
  o.weights_mapped_bytes = 1000;
  o.weights_repacked_bytes = 2000;
  o.layer_parameters = 64000;
  o.active_layer_parameters = 12000;
  o.experts = 64;
  o.experts_used = 8;
  return o;
}

std::unique_ptr<ServiceMetrics> MakeMetrics(const MetricsOptions& o = TestOptions()) {
  auto m = ServiceMetrics::Create(o);
  EXPECT_THAT(m.status(), IsOk());
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(ServiceMetricsTest, EverySeriesIsPresentAtStart) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  const std::string text = m->Serialize();
  const std::set<std::string> families = FamilyNames(text);
  for (const std::string& f : kFamilies) EXPECT_TRUE(families.count(f)) << f;
  for (const std::string& f : families) {
    EXPECT_TRUE(std::find(kFamilies.begin(), kFamilies.end(), f) != kFamilies.end())
        << "unlisted family " << f;
  }

  // Every dllm_* sample carries the model label; process_* carry none.
  for (const Sample& s : ParseSamples(text)) {
    if (s.name.rfind("dllm_", 0) == 0) {
      EXPECT_EQ(s.labels.count("model") ? s.labels.at("model") : "", "tiny") << s.name;
    } else {
      EXPECT_TRUE(s.labels.empty()) << s.name;
    }
  }

  // Static facts from the options.
  EXPECT_EQ(
      Value(
          text, "dllm_build_info",
          {{"arch", "llada"}, {"weight_format", "Q4_K"}, {"isa", "avx2"}, {"cpu_policy", "auto"}}),
      1);
  EXPECT_EQ(Value(text, "dllm_cpu_cores", {{"kind", "performance"}}), 4);
  EXPECT_EQ(Value(text, "dllm_cpu_cores", {{"kind", "efficiency"}}), 2);
  EXPECT_EQ(Value(text, "dllm_engine_threads"), 3);
  EXPECT_EQ(Value(text, "dllm_model_weights_bytes", {{"storage", "mmap"}}), 1000);
  EXPECT_EQ(Value(text, "dllm_model_weights_bytes", {{"storage", "heap"}}), 2000);
  EXPECT_EQ(Value(text, "dllm_model_parameters", {{"kind", "total"}}), 64000);
  EXPECT_EQ(Value(text, "dllm_model_parameters", {{"kind", "active"}}), 12000);
  EXPECT_EQ(Value(text, "dllm_model_experts", {{"kind", "total"}}), 64);
  EXPECT_EQ(Value(text, "dllm_model_experts", {{"kind", "active"}}), 8);

  // Label children exist at zero before any event.
  for (const char* rpc : {"Generate", "Step"}) {
    for (const char* code : {"OK", "CANCELLED", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                             "RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "UNKNOWN"}) {
      EXPECT_EQ(Value(text, "dllm_requests_total", {{"rpc", rpc}, {"code", code}}), 0);
    }
    EXPECT_EQ(Value(text, "dllm_request_duration_seconds_count", {{"rpc", rpc}}), 0);
    EXPECT_EQ(Value(text, "dllm_stream_events_sent_total", {{"rpc", rpc}}), 0);
    EXPECT_EQ(Value(text, "dllm_stream_events_coalesced_total", {{"rpc", rpc}}), 0);
  }
  for (const char* reason :
       {"queue_full", "sessions_full", "invalid", "memory", "draining", "not_ready"}) {
    EXPECT_EQ(Value(text, "dllm_requests_rejected_total", {{"reason", reason}}), 0);
  }
  for (const char* reason : {"eos", "length", "cancelled", "deadline", "error"}) {
    EXPECT_EQ(Value(text, "dllm_requests_finished_total", {{"finish_reason", reason}}), 0);
  }
  for (const char* op : {"embed", "norm", "projections", "attention", "ffn", "head", "sample"}) {
    EXPECT_EQ(Value(text, "dllm_op_duration_seconds_count", {{"op", op}}), 0);
  }
}

TEST(ServiceMetricsTest, HistogramsUseTheServingBuckets) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  const std::string text = m->Serialize();
  // Smallest and largest finite bound of each set (serving.md 6.2).
  EXPECT_EQ(Value(text, "dllm_step_duration_seconds_bucket", {{"le", "0.001"}}), 0);
  EXPECT_EQ(Value(text, "dllm_step_duration_seconds_bucket", {{"le", "160"}}), 0);
  EXPECT_EQ(Value(text, "dllm_request_queue_seconds_bucket", {{"le", "0.01"}}), 0);
  EXPECT_EQ(Value(text, "dllm_request_queue_seconds_bucket", {{"le", "3600"}}), 0);
  EXPECT_EQ(Value(text, "dllm_op_duration_seconds_bucket", {{"op", "ffn"}, {"le", "0.0001"}}), 0);
  EXPECT_EQ(Value(text, "dllm_cancellation_latency_seconds_bucket", {{"le", "10"}}), 0);
  EXPECT_EQ(Value(text, "dllm_tokens_committed_per_step_bucket", {{"le", "256"}}), 0);
  EXPECT_EQ(Value(text, "dllm_request_steps_bucket", {{"le", "1024"}}), 0);
  EXPECT_EQ(Value(text, "dllm_request_canvas_tokens_bucket", {{"le", "16384"}}), 0);
}

TEST(ServiceMetricsTest, EventsMoveTheirSeries) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  m->SetLoad(2, 5, 1);
  m->SetActivationBytes(4096);
  m->SetHttpConnections(7, 3);
  m->OnRejected(RejectReason::kQueueFull);
  m->OnRejected(RejectReason::kQueueFull);
  m->OnRejected(RpcKind::kStep, RejectReason::kDraining, absl::StatusCode::kUnavailable);
  m->OnStarted(0.02, 11, 64);
  ForwardStats ops;
  ops.embed = 0.0001, ops.norm = 0.0002, ops.projections = 0.003, ops.attention = 0.004;
  ops.ffn = 0.006, ops.head = 0.002, ops.total = 0.0153;
  ops.rows = 128;
  // Two requests' steps sharing one forward of 128 rows (64 each): the
  // forward's op times once, each request's own rows.
  m->OnForward(ops, 0.0153);
  m->OnStep(64, 0.02, 0.0004, 2, 3);
  m->OnStep(64, 0.03, 0.0004, 2, 5);
  ForwardStats cached_ops = ops;
  cached_ops.rows = 20;
  m->OnForward(ops, 0.4);
  m->OnStep(128, 0.5, 0.0004, 1, 1, CacheUse::kRefill);
  m->OnForward(cached_ops, 0.05);
  m->OnStep(20, 0.1, 0.0004, 1, 1, CacheUse::kRead);
  m->OnForward(cached_ops, 0.05);
  m->OnStep(20, 0.1, 0.0004, 1, 1, CacheUse::kRead);
  m->OnStep(0, 0.1, 0.0004, 0, 0, CacheUse::kNone);  // no forward: no rows
  m->OnFirstStep(0.04);
  m->OnFirstToken(0.07);
  m->OnFinished(RpcKind::kGenerate, FinishKind::kEos, absl::StatusCode::kOk, 1.5, 2, 8);
  m->OnFinished(RpcKind::kGenerate, FinishKind::kCancelled, absl::StatusCode::kCancelled, 0.3, 1,
                0);
  m->OnFinished(RpcKind::kStep, FinishKind::kError, static_cast<absl::StatusCode>(99), 0.3, 1,
                0);  // not a canonical code: counted as UNKNOWN
  m->OnCancelled(0.003);
  m->OnEventsSent(RpcKind::kGenerate, 7, 2);

  const std::string t = m->Serialize();
  EXPECT_EQ(Value(t, "dllm_requests_running"), 2);
  EXPECT_EQ(Value(t, "dllm_requests_waiting"), 5);
  EXPECT_EQ(Value(t, "dllm_sessions_open"), 1);
  EXPECT_EQ(Value(t, "dllm_activation_buffer_bytes"), 4096);
  EXPECT_EQ(Value(t, "dllm_http_connections", {{"state", "open"}}), 7);
  EXPECT_EQ(Value(t, "dllm_http_connections", {{"state", "idle"}}), 3);
  EXPECT_EQ(Value(t, "dllm_requests_rejected_total", {{"reason", "queue_full"}}), 2);
  EXPECT_EQ(Value(t, "dllm_requests_rejected_total", {{"reason", "draining"}}), 1);
  EXPECT_EQ(Value(t, "dllm_requests_total", {{"rpc", "Step"}, {"code", "UNAVAILABLE"}}), 1);

  EXPECT_EQ(Value(t, "dllm_request_queue_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_request_queue_seconds_sum"), 0.02);
  EXPECT_EQ(Value(t, "dllm_request_queue_seconds_bucket", {{"le", "0.01"}}), 0);
  EXPECT_EQ(Value(t, "dllm_request_queue_seconds_bucket", {{"le", "0.05"}}), 1);
  EXPECT_EQ(Value(t, "dllm_prompt_tokens_total"), 11);
  EXPECT_EQ(Value(t, "dllm_request_canvas_tokens_bucket", {{"le", "32"}}), 0);
  EXPECT_EQ(Value(t, "dllm_request_canvas_tokens_bucket", {{"le", "64"}}), 1);

  EXPECT_EQ(Value(t, "dllm_steps_total"), 6);
  EXPECT_EQ(Value(t, "dllm_forward_passes_total"), 7);
  EXPECT_EQ(Value(t, "dllm_step_duration_seconds_count"), 6);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_step_duration_seconds_sum"), 0.85);
  EXPECT_EQ(Value(t, "dllm_forward_duration_seconds_count"), 4);  // once per forward
  EXPECT_DOUBLE_EQ(Value(t, "dllm_op_duration_seconds_sum", {{"op", "attention"}}), 0.016);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_op_duration_seconds_sum", {{"op", "sample"}}), 0.0024);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_op_duration_seconds_sum", {{"op", "embed"}}), 0.0004);
  EXPECT_EQ(Value(t, "dllm_op_duration_seconds_count", {{"op", "head"}}), 4);
  EXPECT_EQ(Value(t, "dllm_op_duration_seconds_count", {{"op", "sample"}}), 6);  // per step
  EXPECT_EQ(Value(t, "dllm_cache_refreshes_total"), 1);
  EXPECT_EQ(Value(t, "dllm_cache_step_duration_seconds_count", {{"step", "full"}}), 1);
  EXPECT_EQ(Value(t, "dllm_cache_step_duration_seconds_count", {{"step", "cached"}}), 2);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_cache_step_duration_seconds_sum", {{"step", "cached"}}), 0.2);
  EXPECT_EQ(Value(t, "dllm_forward_rows_count"), 5);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_forward_rows_sum"), 2 * 64 + 128 + 2 * 20);
  EXPECT_EQ(Value(t, "dllm_forward_rows_bucket", {{"le", "32"}}), 2);
  EXPECT_EQ(Value(t, "dllm_tokens_committed_per_step_count"), 6);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_tokens_committed_per_step_sum"), 11);
  EXPECT_EQ(Value(t, "dllm_tokens_committed_per_step_bucket", {{"le", "4"}}), 5);

  EXPECT_EQ(Value(t, "dllm_time_to_first_step_seconds_count"), 1);
  EXPECT_EQ(Value(t, "dllm_time_to_first_token_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_time_to_first_token_seconds_sum"), 0.07);

  EXPECT_EQ(Value(t, "dllm_requests_total", {{"rpc", "Generate"}, {"code", "OK"}}), 1);
  // Code names match case-insensitively; unknown names count as UNKNOWN.
  EXPECT_EQ(Value(t, "dllm_requests_total", {{"rpc", "Generate"}, {"code", "CANCELLED"}}), 1);
  EXPECT_EQ(Value(t, "dllm_requests_total", {{"rpc", "Step"}, {"code", "UNKNOWN"}}), 1);
  EXPECT_EQ(Value(t, "dllm_requests_finished_total", {{"finish_reason", "eos"}}), 1);
  EXPECT_EQ(Value(t, "dllm_requests_finished_total", {{"finish_reason", "cancelled"}}), 1);
  EXPECT_EQ(Value(t, "dllm_requests_finished_total", {{"finish_reason", "error"}}), 1);
  EXPECT_EQ(Value(t, "dllm_request_duration_seconds_count", {{"rpc", "Generate"}}), 2);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_request_duration_seconds_sum", {{"rpc", "Generate"}}), 1.8);
  EXPECT_EQ(Value(t, "dllm_request_duration_seconds_count", {{"rpc", "Step"}}), 1);
  EXPECT_EQ(Value(t, "dllm_request_steps_count"), 3);
  EXPECT_DOUBLE_EQ(Value(t, "dllm_request_steps_sum"), 4);
  EXPECT_EQ(Value(t, "dllm_generated_tokens_total"), 8);

  EXPECT_EQ(Value(t, "dllm_cancellation_latency_seconds_count"), 1);
  EXPECT_EQ(Value(t, "dllm_cancellation_latency_seconds_bucket", {{"le", "0.005"}}), 1);
  EXPECT_EQ(Value(t, "dllm_stream_events_sent_total", {{"rpc", "Generate"}}), 7);
  EXPECT_EQ(Value(t, "dllm_stream_events_coalesced_total", {{"rpc", "Generate"}}), 2);
  EXPECT_EQ(Value(t, "dllm_stream_events_sent_total", {{"rpc", "Step"}}), 0);
}

TEST(ServiceMetricsTest, TheNoOpObjectTakesEveryCallAndRecordsNothing) {
  ServiceMetrics* m = ServiceMetrics::NoOp();
  EXPECT_EQ(ServiceMetrics::OrNoOp(nullptr), m);
  m->SetLoad(1, 2, 3);
  m->OnRejected(RpcKind::kGenerate, RejectReason::kQueueFull, absl::StatusCode::kResourceExhausted);
  m->OnForward(ForwardStats{}, 0.1);
  m->OnStep(1, 0.1, 0.0, 1, 1);
  m->OnFinished(RpcKind::kStep, FinishKind::kEos, absl::StatusCode::kOk, 1.0, 1, 1);
  m->OnEventsSent(RpcKind::kStep, 3, 0);
  EXPECT_EQ(m->Serialize(), "");
}

TEST(ServiceMetricsTest, ProcessSeriesDescribeThisProcess) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  const std::string t = m->Serialize();
  EXPECT_GT(Value(t, "process_resident_memory_bytes"), 0);
  EXPECT_GE(Value(t, "process_virtual_memory_bytes"), Value(t, "process_resident_memory_bytes"));
  EXPECT_GT(Value(t, "dllm_process_resident_anon_bytes"), 0);
  EXPECT_GE(Value(t, "dllm_process_resident_peak_bytes"),
            Value(t, "dllm_process_resident_anon_bytes"));
  EXPECT_GE(Value(t, "process_cpu_seconds_total"), 0);
  EXPECT_GE(Value(t, "process_open_fds"), 3);  // stdin, stdout, stderr
  EXPECT_GE(Value(t, "process_max_fds"), Value(t, "process_open_fds"));
  EXPECT_GE(Value(t, "process_threads"), 1);
  // After 2020-01-01 and not in the future.
  EXPECT_GT(Value(t, "process_start_time_seconds"), 1577836800);
  EXPECT_LE(Value(t, "process_start_time_seconds"), static_cast<double>(std::time(nullptr)) + 1);
}

TEST(ServiceMetricsTest, ConcurrentEventsAreAllCounted) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  constexpr int kThreads = 4, kSteps = 500;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int s = 0; s < kSteps; ++s) {
        m->OnStep(1, 0.001, 0, 1, 1);
        m->OnEventsSent(RpcKind::kGenerate, 1, 0);
        if (s % 50 == 0) m->Serialize();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::string t = m->Serialize();
  EXPECT_EQ(Value(t, "dllm_steps_total"), kThreads * kSteps);
  EXPECT_EQ(Value(t, "dllm_step_duration_seconds_count"), kThreads * kSteps);
  EXPECT_EQ(Value(t, "dllm_stream_events_sent_total", {{"rpc", "Generate"}}), kThreads * kSteps);
}

}  // namespace
}  // namespace dllm
