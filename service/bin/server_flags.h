// dllm-server's flags: which it takes, its usage text, and what they ask
// for (ServerSetup), checked before anything is loaded.
#ifndef DLLM_SERVICE_BIN_SERVER_FLAGS_H_
#define DLLM_SERVICE_BIN_SERVER_FLAGS_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "engine/base/flags.h"
#include "engine/model/isa_option.h"
#include "engine/model/model.h"
#include "engine/parallel/cpu_topology.h"
#include "service/grpc/server.h"
#include "service/http/http_api.h"
#include "service/http/http_server.h"

namespace dllm {

extern const std::set<std::string> kServerValueFlags;
extern const std::set<std::string> kServerBoolFlags;
extern const char* const kServerUsage;

// What the flags ask for, checked, before anything is loaded.
struct ServerSetup {
  ServerOptions options;
  ModelOptions model;
  IsaLevel isa = IsaLevel::kScalar;
  CpuPolicy policy = CpuPolicy::kAuto;
  std::string metrics_listen;  // HOST:PORT, or "none"
  HttpOptions http;            // http.listen "none": no HTTP API
  HttpApiOptions api;          // the key from --api-key-file
};

absl::StatusOr<ServerSetup> SetupFromFlags(const ParsedFlags& flags);

}  // namespace dllm

#endif  // DLLM_SERVICE_BIN_SERVER_FLAGS_H_
