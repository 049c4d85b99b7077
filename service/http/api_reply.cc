#include "service/http/api_reply.h"

#include "absl/strings/str_cat.h"

namespace dllm {

void SendJson(HttpResponder& out, ServiceMetrics& metrics, const std::string& path, int status,
              const Json& body, const HttpHeaders& headers) {
  metrics.OnHttpResponse(path, status);
  out.Send(status, kJsonContentType, DumpJson(body), headers);
}

void SendError(HttpResponder& out, ServiceMetrics& metrics, const std::string& path,
               const ApiError& error, const Json& body) {
  HttpHeaders headers;
  if (error.status == 429 || error.status == 503) headers.emplace_back("Retry-After", "1");
  if (error.status == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
  SendJson(out, metrics, path, error.status, body.is_null() ? ApiErrorBody(error) : body, headers);
}

std::string EventData(const Json& chunk) { return absl::StrCat("data: ", DumpJson(chunk), "\n\n"); }

}  // namespace dllm
