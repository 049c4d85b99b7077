// dllm-client health: exit 0 when the service reports SERVING.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "client/cli/common.h"

namespace dllm::client_cli {

int RunHealth(const ParsedFlags& flags) {
  if (auto s = flags.CheckOnly(Union(kConnectionFlags, {"service", "wait-seconds"})); !s.ok()) {
    return UsageError(s);
  }
  double wait_seconds = 0;
  if (auto s = flags.GetNumber("wait-seconds", &wait_seconds); !s.ok()) return UsageError(s);
  if (wait_seconds < 0) {
    return UsageError(absl::InvalidArgumentError(
        absl::StrCat("--wait-seconds: '", flags.Get("wait-seconds"), "' must be >= 0")));
  }
  int exit_code = 0;
  const std::unique_ptr<DllmClient> client = Connect(flags, &exit_code);
  if (client == nullptr) return exit_code;
  const std::string service = flags.Get("service");
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::microseconds(static_cast<int64_t>(wait_seconds * 1e6));
  using Health = grpc::health::v1::HealthCheckResponse;
  while (true) {
    auto status = client->CheckHealth(service);
    const bool serving = status.ok() && *status == Health::SERVING;
    if (serving || std::chrono::steady_clock::now() >= until) {
      if (!status.ok()) return Fail(status.status());
      std::printf("%s\n", Health::ServingStatus_Name(*status).c_str());
      return serving ? 0 : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace dllm::client_cli
