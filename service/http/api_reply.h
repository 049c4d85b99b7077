// How every HTTP endpoint answers with a whole JSON body: the response
// counted under its path (the metrics' endpoint label), errors with the
// headers that go with their status.
#ifndef DLLM_SERVICE_HTTP_API_REPLY_H_
#define DLLM_SERVICE_HTTP_API_REPLY_H_

#include <string>

#include "service/http/api_error.h"
#include "service/http/http_server.h"
#include "service/json/json.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

inline constexpr const char* kJsonContentType = "application/json";

// `body` with `status`, counted under `path` in `metrics`.
void SendJson(HttpResponder& out, ServiceMetrics& metrics, const std::string& path, int status,
              const Json& body, const HttpHeaders& headers = {});

// `error` in OpenAI's shape, or `body` when given (another API's shape, as
// llama-server's for /infill); Retry-After on 429 and 503 (as gRPC's
// retry-after-ms), WWW-Authenticate on 401.
void SendError(HttpResponder& out, ServiceMetrics& metrics, const std::string& path,
               const ApiError& error, const Json& body = nullptr);

// "data: JSON\n\n", one server-sent event.
std::string EventData(const Json& chunk);

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_API_REPLY_H_
