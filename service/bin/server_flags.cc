#include "service/bin/server_flags.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/base/status_macros.h"
#include "engine/tokenizer/chat_template.h"
#include "kernels/cpu_features.h"
#include "service/engine/request_validation.h"

namespace dllm {

const std::set<std::string> kServerValueFlags = {"model",
                                                 "listen",
                                                 "metrics-listen",
                                                 "max-running",
                                                 "max-queue",
                                                 "max-sessions",
                                                 "threads",
                                                 "cpu-policy",
                                                 "isa",
                                                 "tls-cert",
                                                 "tls-key",
                                                 "drain-seconds",
                                                 "session-idle-seconds",
                                                 "port-file",
                                                 "memory-budget-mb",
                                                 "chat-template",
                                                 "http-listen",
                                                 "api-key-file",
                                                 "http-max-body-bytes",
                                                 "http-allow-origin",
                                                 "http-max-connections",
                                                 "http-max-connections-per-peer",
                                                 "http-header-timeout-seconds",
                                                 "http-idle-timeout-seconds",
                                                 "http-heartbeat-seconds",
                                                 "max-batch-requests",
                                                 "max-batch-rows"};
const std::set<std::string> kServerBoolFlags = {};

const char* const kServerUsage =
    "usage: dllm-server --model PATH [--listen 127.0.0.1:50051] [--metrics-listen "
    "127.0.0.1:9464|none]\n"
    "         [--max-batch-requests 8] [--max-batch-rows N] [--max-running N]\n"
    "         [--max-queue 8] [--max-sessions 4] [--threads N]\n"
    "         [--cpu-policy auto|performance|all] [--isa auto|scalar|avx2|avx512|amx]\n"
    "         [--tls-cert F --tls-key F] [--drain-seconds 30] [--session-idle-seconds 300]\n"
    "         [--memory-budget-mb N] [--port-file FILE]\n"
    "         [--chat-template plain|llada|dream|qwen2.5|chatml|llada-moe|gemma4]\n"
    "         [--http-listen 127.0.0.1:8080|none] [--api-key-file F] [--http-max-body-bytes "
    "4194304]\n"
    "         [--http-allow-origin ORIGIN[,ORIGIN...]|*]\n"
    "         [--http-max-connections 4096] [--http-max-connections-per-peer 512]\n"
    "         [--http-header-timeout-seconds 10]\n"
    "         [--http-idle-timeout-seconds 60] [--http-heartbeat-seconds 10]\n";

namespace {

// MemAvailable (or the cgroup limit, when lower) minus a margin for the
// rest of the process: what admitted requests may reserve together.
uint64_t DefaultMemoryBudget() {
  const MemoryInfo m = ReadMemoryInfo();
  uint64_t available = m.available_bytes;
  if (m.cgroup_limit_bytes) available = std::min(available, *m.cgroup_limit_bytes);
  const uint64_t margin = available / 10 + (256ull << 20);
  return available > margin ? available - margin : (64ull << 20);
}

// The key an HTTP client must send as "Authorization: Bearer KEY": the
// file's content without surrounding whitespace (a trailing newline).
absl::StatusOr<std::string> ReadApiKey(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--api-key-file: cannot read ", path));
  std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const absl::string_view stripped = absl::StripAsciiWhitespace(key);
  if (stripped.empty())
    return absl::InvalidArgumentError(absl::StrCat("--api-key-file: ", path, " is empty"));
  for (char c : stripped) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("--api-key-file: ", path, " holds a character that is not printable ASCII"));
    }
  }
  return std::string(stripped);
}

// The HTTP API's flags: its listener, limits and timeouts, the API key, the
// origins browsers may call it from, the heartbeat.
absl::Status HttpSetupFromFlags(const ParsedFlags& flags, ServerSetup* out) {
  ServerSetup& setup = *out;
  const ServerOptions& options = setup.options;
  HttpOptions& http = setup.http;
  http.listen = flags.Get("http-listen", http.listen);
  DLLM_ASSIGN_OR_RETURN(const int64_t body_bytes,
                        flags.GetIntInRange("http-max-body-bytes", options.max_message_bytes, 1024,
                                            int64_t{1} << 30));
  http.max_body_bytes = static_cast<uint64_t>(body_bytes);
  DLLM_ASSIGN_OR_RETURN(http.max_connections, flags.GetIntInRange("http-max-connections",
                                                                  http.max_connections, 1, 65536));
  DLLM_ASSIGN_OR_RETURN(
      http.max_connections_per_peer,
      flags.GetIntInRange("http-max-connections-per-peer",
                          std::min(http.max_connections_per_peer, http.max_connections), 1,
                          http.max_connections));
  DLLM_ASSIGN_OR_RETURN(
      http.header_timeout_seconds,
      flags.GetIntInRange("http-header-timeout-seconds", http.header_timeout_seconds, 1, 3600));
  DLLM_ASSIGN_OR_RETURN(
      http.idle_timeout_seconds,
      flags.GetIntInRange("http-idle-timeout-seconds", http.idle_timeout_seconds, 1, 24 * 3600));
  http.tls_cert_file = options.tls_cert_file;
  http.tls_key_file = options.tls_key_file;
  if (flags.Has("api-key-file")) {
    DLLM_ASSIGN_OR_RETURN(setup.api.api_key, ReadApiKey(flags.Get("api-key-file")));
  }
  if (flags.Has("http-allow-origin")) {
    for (absl::string_view origin :
         absl::StrSplit(flags.Get("http-allow-origin"), ',', absl::SkipWhitespace())) {
      setup.api.allowed_origins.emplace_back(absl::StripAsciiWhitespace(origin));
    }
  }
  setup.api.loopback_host_only = ListensOnLoopbackOnly(http.listen);
  DLLM_ASSIGN_OR_RETURN(setup.api.heartbeat_seconds,
                        flags.GetIntInRange("http-heartbeat-seconds", setup.api.heartbeat_seconds,
                                            1, kMaxHeartbeatSeconds));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerSetup> SetupFromFlags(const ParsedFlags& flags) {
  ServerSetup setup;
  ServerOptions& options = setup.options;
  options.model_path = flags.Get("model");
  options.listen = flags.Get("listen", "127.0.0.1:50051");
  // Batching is on by default: up to 8 requests' steps share each forward,
  // and as many requests run (advance together) as may share one.
  DLLM_ASSIGN_OR_RETURN(options.engine.max_batch_requests,
                        flags.GetIntInRange("max-batch-requests", 8, 1, 256));
  if (flags.Has("max-batch-rows")) {  // else the worker's default, from the memory budget
    DLLM_ASSIGN_OR_RETURN(options.engine.max_batch_rows,
                          flags.GetIntInRange("max-batch-rows", 1, 1, 1 << 20));
  }
  DLLM_ASSIGN_OR_RETURN(
      options.engine.max_running,
      flags.GetIntInRange("max-running", options.engine.max_batch_requests, 1, 1024));
  DLLM_ASSIGN_OR_RETURN(options.engine.max_queue, flags.GetIntInRange("max-queue", 8, 0, 1 << 20));
  DLLM_ASSIGN_OR_RETURN(options.engine.max_sessions,
                        flags.GetIntInRange("max-sessions", 4, 0, 1 << 16));
  DLLM_ASSIGN_OR_RETURN(const int64_t threads, flags.GetIntInRange("threads", 0, 0, 4096));
  DLLM_ASSIGN_OR_RETURN(options.drain_seconds,
                        flags.GetIntInRange("drain-seconds", 30, 0, 24 * 3600));
  DLLM_ASSIGN_OR_RETURN(options.session_idle_seconds,
                        flags.GetIntInRange("session-idle-seconds", 300, 1, 24 * 3600));
  DLLM_ASSIGN_OR_RETURN(const int64_t budget_mb,
                        flags.GetIntInRange("memory-budget-mb", 0, 0, 1 << 30));
  options.engine.memory_budget_bytes = flags.Has("memory-budget-mb")
                                           ? static_cast<uint64_t>(budget_mb) << 20
                                           : DefaultMemoryBudget();
  DLLM_ASSIGN_OR_RETURN(setup.isa, ResolveIsaLevel(flags.Get("isa")));
  const std::optional<CpuPolicy> policy = ParseCpuPolicy(flags.Get("cpu-policy", "auto"));
  if (!policy) return absl::InvalidArgumentError("--cpu-policy must be auto, performance or all");
  setup.policy = *policy;
  options.tls_cert_file = flags.Get("tls-cert");
  options.tls_key_file = flags.Get("tls-key");

  const CpuTopology topology = ReadCpuTopology();
  options.plan = PlanThreads(topology, setup.policy, static_cast<int>(threads));
  options.facts.isa = IsaLevelName(setup.isa);
  options.facts.cpu = GetCpuFeatures().brand;
  options.facts.cpu_policy = CpuPolicyName(setup.policy);
  options.facts.performance_cores = static_cast<int>(topology.performance_cpus.size());
  options.facts.efficiency_cores = static_cast<int>(topology.efficiency_cpus.size());

  setup.model.isa = setup.isa;
  if (flags.Has("chat-template")) {
    DLLM_ASSIGN_OR_RETURN(setup.model.chat_template, ParseChatTemplate(flags.Get("chat-template")));
  }
  setup.metrics_listen = flags.Get("metrics-listen", "127.0.0.1:9464");

  DLLM_RETURN_IF_ERROR(HttpSetupFromFlags(flags, &setup));
  return setup;
}

}  // namespace dllm
