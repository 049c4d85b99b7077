// `dllm-server`: serves one model over gRPC (dllm.v1.DiffusionLM) and the
// OpenAI-compatible HTTP API (--http-listen, service/http) until
// SIGTERM or SIGINT, then drains: readiness NOT_SERVING, new calls
// UNAVAILABLE, in-flight streams finish for up to --drain-seconds, exit 0.
// Signals are taken by sigwait on the main thread (blocked everywhere else
// before any thread starts), so no work happens in a signal handler.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/base/flags.h"
#include "engine/base/status_macros.h"
#include "engine/base/stopwatch.h"
#include "engine/base/utf8.h"
#include "engine/model/isa_option.h"
#include "engine/parallel/cpu_topology.h"
#include "engine/sampler/entropy_bound_sampler.h"
#include "engine/tokenizer/chat_template.h"
#include "service/bin/server_flags.h"
#include "service/grpc/server.h"
#include "service/http/http_api.h"
#include "service/http/http_server.h"
#include "service/http/metrics_endpoint.h"
#include "service/metrics/service_metrics.h"

namespace dllm {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "dllm-server: %s\n", PrintableText(s.message()).c_str());
  return 2;
}

// SIGTERM and SIGINT, taken by one thread: before the server serves they end
// the process at once (non-zero: startup was interrupted); the first while
// serving starts the drain, a second ends it without waiting.
class ShutdownSignals {
 public:
  void Watch(const sigset_t& signals) {
    for (;;) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      std::unique_lock<std::mutex> lock(mu_);
      if (server_ == nullptr) {
        std::fprintf(stderr, "dllm-server: %s before the server was ready: exiting\n",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT");
        std::_Exit(128 + sig);
      }
      if (++count_ == 1) {
        first_ = sig;
        cv_.notify_all();
      } else {
        std::fprintf(stderr, "dllm-server: second signal: ending the drain now\n");
        server_->EndDrainNow();
      }
    }
  }
  // Serves until the first signal; returns it.
  int Serve(DllmServer* server) {
    std::unique_lock<std::mutex> lock(mu_);
    server_ = server;
    cv_.wait(lock, [this] { return count_ > 0; });
    return first_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  DllmServer* server_ = nullptr;
  int count_ = 0;
  int first_ = 0;
};

// Loads the model and says what was loaded and how it will be served; sets
// the engine's row budget when --max-batch-rows did not (it depends on the
// model).
absl::StatusOr<std::shared_ptr<const Model>> LoadModel(ServerSetup& setup) {
  ServerOptions& options = setup.options;
  std::fprintf(stderr, "dllm-server: loading %s\n", options.model_path.c_str());
  const Stopwatch load_time;
  DLLM_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model,
                        Model::Load(options.model_path, setup.model));
  const ModelConfig& mc = model->config();
  if (mc.canvas_length > 0) {
    // Every entropy-bound request starts from the file's diffusion.eb_*
    // keys: a bad one is the file's fault, said once, here.
    DLLM_RETURN_IF_ERROR(EntropyBoundConfigFromGguf(model->file()).status());
  }
  if (!model->chat_template().recognised) {
    std::fprintf(stderr, "dllm-server: warning: %s\n", kUnrecognisedChatTemplateWarning);
  }
  std::fprintf(stderr, "dllm-server: model %s (%s, %s), loaded in %.2f s\n",
               options.model_path.c_str(), absl::CHexEscape(mc.name).c_str(),
               std::string(ArchName(mc.arch)).c_str(), load_time.ElapsedSeconds());
  std::fprintf(stderr, "dllm-server: isa %s, %d engine threads (%s), cpu policy %s\n",
               IsaLevelName(setup.isa), options.plan.threads, options.plan.why.c_str(),
               CpuPolicyName(setup.policy));
  std::string rows_from = "--max-batch-rows";
  if (options.engine.max_batch_rows == 0) {
    options.engine.max_batch_rows = DefaultMaxBatchRows(mc, options.engine.memory_budget_bytes);
    const int unbudgeted = DefaultMaxBatchRows(mc, 0);
    rows_from = absl::StrCat("the model's context of ", mc.n_ctx_train, ", twice for CFG");
    if (options.engine.max_batch_rows < unbudgeted) {
      // Said out loud: it also caps the longest canvas a request may ask for.
      options.engine.max_batch_rows_from_budget = true;
      rows_from = absl::StrCat("lowered from ", unbudgeted, " by --memory-budget-mb");
    }
  }
  std::fprintf(stderr,
               "dllm-server: max running %d, max queue %d, max sessions %d, batches of up to %d "
               "requests and %d rows a step (%s), memory budget %llu MiB\n",
               options.engine.max_running, options.engine.max_queue, options.engine.max_sessions,
               options.engine.max_batch_requests, options.engine.max_batch_rows, rows_from.c_str(),
               static_cast<unsigned long long>(options.engine.memory_budget_bytes >> 20));
  return model;
}

// The Prometheus series (served on their own HTTP port by MetricsEndpoint
// unless --metrics-listen none).
absl::StatusOr<std::unique_ptr<ServiceMetrics>> MakeMetrics(const ServerSetup& setup,
                                                            const Model& model) {
  const ModelConfig& mc = model.config();
  MetricsOptions mo;
  mo.model_name = mc.name;
  mo.arch = std::string(ArchName(mc.arch));
  mo.weight_format = WeightFormat(model);
  mo.isa = IsaLevelName(setup.isa);
  mo.cpu_policy = CpuPolicyName(setup.policy);
  mo.engine_threads = setup.options.plan.threads;
  mo.performance_cores = setup.options.facts.performance_cores;
  mo.efficiency_cores = setup.options.facts.efficiency_cores;
  mo.weights_mapped_bytes = model.file_bytes_kept();
  mo.layer_parameters = static_cast<uint64_t>(mc.layer_params());
  mo.active_layer_parameters = static_cast<uint64_t>(mc.active_layer_params());
  mo.experts = static_cast<int>(mc.n_expert);
  mo.experts_used = static_cast<int>(mc.n_expert_used);
  mo.weights_repacked_bytes = model.owned_weight_bytes();
  return ServiceMetrics::Create(mo);
}

// Every connection is a descriptor: lets the process open as many as the
// HTTP limits allow (plus the metrics endpoint's and a margin for gRPC and
// files), up to the hard limit, and says so when the hard limit is lower.
void RaiseDescriptorLimit(const ServerSetup& setup) {
  const rlim_t wanted = static_cast<rlim_t>(setup.http.max_connections) +
                        MetricsEndpoint::Options("").max_connections + 1024;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= wanted) return;
  limit.rlim_cur = std::min(wanted, limit.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < wanted) {
    std::fprintf(stderr,
                 "dllm-server: warning: open files limited to %llu (ulimit -Hn); "
                 "--http-max-connections %d wants %llu\n",
                 static_cast<unsigned long long>(limit.rlim_cur), setup.http.max_connections,
                 static_cast<unsigned long long>(wanted));
  }
}

// {"grpc": PORT, "metrics": PORT, "http": PORT} (0: not served), renamed
// into place so that a reader never sees half a file.
absl::Status WritePortFile(const std::string& path, int grpc_port, int metrics_port,
                           int http_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "{\"grpc\": " << grpc_port << ", \"metrics\": " << metrics_port
        << ", \"http\": " << http_port << "}\n";
    // The bytes reach the file at close: a full disk shows there, not at <<.
    out.close();
    if (!out) {
      const int error = errno;
      std::remove(tmp.c_str());  // nothing half-written left behind
      return absl::InternalError(
          absl::StrCat("--port-file: cannot write ", tmp, ": ", std::strerror(error)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("--port-file: cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

// The process's setup before anything starts a thread: two malloc arenas a
// core, and SIGTERM / SIGINT taken by one thread for `shutdown`.
void TakeShutdownSignals(ShutdownSignals& shutdown) {
  // glibc gives each thread that allocates an arena of its own, up to 8 per
  // core, and keeps their freed pages: with a thread per HTTP request, large
  // bodies one after another left the RSS at several times what one needs
  // (issue #34 R6). Two arenas per core keep allocation uncontended.
  mallopt(M_ARENA_MAX, 2 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // Every thread started from here on inherits the blocked set; one thread
  // takes the signals from the start, so that SIGTERM works while the model
  // loads (a slow disk, a huge file) as well as while serving.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([&shutdown, signals] { shutdown.Watch(signals); }).detach();
}

// The Prometheus endpoint on `listen`; null for "none".
absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsEndpoint(const std::string& listen,
                                                                      ServiceMetrics* metrics) {
  if (listen == "none") return nullptr;
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<MetricsEndpoint> endpoint,
                        MetricsEndpoint::Start(listen, metrics));
  std::fprintf(stderr, "dllm-server: metrics on http://%s:%d/metrics\n",
               listen.substr(0, listen.rfind(':')).c_str(), endpoint->port());
  return endpoint;
}

// The HTTP API's server; what it listens on is added to `listening`.
absl::StatusOr<std::unique_ptr<HttpServer>> StartHttp(const ServerSetup& setup, HttpApi* api,
                                                      std::string* listening) {
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> http, HttpServer::Start(setup.http, api));
  const std::string& listen = setup.http.listen;
  absl::StrAppendFormat(
      listening, "dllm-server: OpenAI-compatible HTTP API on %s://%s:%d/v1 (%s)\n",
      http->tls() ? "https" : "http", listen.substr(0, listen.rfind(':')), http->port(),
      setup.api.api_key.empty() ? "no API key" : "API key required");
  if (!setup.api.loopback_host_only && setup.api.api_key.empty()) {
    std::fprintf(stderr,
                 "dllm-server: warning: the HTTP API listens beyond loopback without an API "
                 "key: anyone who can reach %s can use it (--api-key-file)\n",
                 listen.c_str());
  }
  return http;
}

// "listening on HOST:PORT (plaintext|TLS)", said once the warm-up ran.
std::string ListeningLine(const ServerOptions& options, int port) {
  const std::string host = options.listen.substr(0, options.listen.rfind(':'));
  return absl::StrFormat("dllm-server: listening on %s:%d (%s)\n", host, port,
                         options.tls_cert_file.empty() ? "plaintext" : "TLS");
}

int Run(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc - 1, argv + 1, kServerValueFlags, kServerBoolFlags);
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help || !flags->Has("model") || !flags->positional.empty()) {
    std::fputs(kServerUsage, flags->help ? stdout : stderr);
    return flags->help ? 0 : 2;
  }
  static ShutdownSignals shutdown;
  TakeShutdownSignals(shutdown);

  absl::StatusOr<ServerSetup> setup = SetupFromFlags(*flags);
  if (!setup.ok()) return Fail(setup.status());
  ServerOptions& options = setup->options;
  absl::StatusOr<std::shared_ptr<const Model>> model = LoadModel(*setup);
  if (!model.ok()) return Fail(model.status());
  RaiseDescriptorLimit(*setup);
  absl::StatusOr<std::unique_ptr<ServiceMetrics>> metrics = MakeMetrics(*setup, **model);
  if (!metrics.ok()) return Fail(metrics.status());
  options.metrics = metrics->get();
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics_endpoint =
      StartMetricsEndpoint(setup->metrics_listen, metrics->get());
  if (!metrics_endpoint.ok()) return Fail(metrics_endpoint.status());
  const int metrics_port = *metrics_endpoint ? (*metrics_endpoint)->port() : 0;

  absl::StatusOr<std::unique_ptr<DllmServer>> server = DllmServer::Start(*model, options);
  if (!server.ok()) return Fail(server.status());
  // Said once the warm-up step has run: a configuration that cannot run a
  // step (--max-batch-rows 1) fails before anything claims to listen.
  std::string listening = ListeningLine(options, (*server)->port());
  // The HTTP API starts with the gRPC server (both share its service), so
  // that /health/ready answers 503 during the warm-up.
  std::unique_ptr<HttpApi> api;
  std::unique_ptr<HttpServer> http;
  if (setup->http.listen != "none") {
    api = std::make_unique<HttpApi>(&(*server)->admission(), setup->api);
    absl::StatusOr<std::unique_ptr<HttpServer>> started = StartHttp(*setup, api.get(), &listening);
    if (!started.ok()) {
      (*server)->Shutdown();
      return Fail(started.status());
    }
    http = std::move(*started);
  }
  if (absl::Status ready = (*server)->WaitReady(std::chrono::hours(24)); !ready.ok()) {
    http.reset();
    (*server)->Shutdown();
    return Fail(ready);
  }
  std::fputs(listening.c_str(), stderr);
  std::fprintf(stderr, "dllm-server: ready (warm-up step done)\n");
  if (flags->Has("port-file")) {
    if (absl::Status s = WritePortFile(flags->Get("port-file"), (*server)->port(), metrics_port,
                                       http ? http->port() : 0);
        !s.ok()) {
      return Fail(s);
    }
  }

  const int signal_number = shutdown.Serve(server->get());
  std::fprintf(stderr, "dllm-server: %s: draining (up to %d s; a second signal ends it now)\n",
               signal_number == SIGTERM ? "SIGTERM" : "SIGINT", options.drain_seconds);
  // HTTP streams are the service's streams too: the drain waits for them.
  (*server)->Drain(std::chrono::seconds(options.drain_seconds));
  if (http && !http->Stop(setup->http.write_timeout_seconds + 2)) {
    // A request still being handled uses the API: it outlives the server
    // (the process is ending).
    [[maybe_unused]] HttpApi* const in_use = api.release();
  }
  http.reset();
  api.reset();
  server->reset();
  metrics_endpoint->reset();  // before the series it serves
  metrics->reset();
  std::fprintf(stderr, "dllm-server: stopped\n");
  return 0;
}

}  // namespace
}  // namespace dllm

int main(int argc, char** argv) { return dllm::Run(argc, argv); }
