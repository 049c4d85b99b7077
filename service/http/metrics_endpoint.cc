#include "service/http/metrics_endpoint.h"

#include "absl/strings/str_cat.h"

namespace dllm {

HttpOptions MetricsEndpoint::Options(const std::string& listen) {
  HttpOptions o;
  o.listen = listen;
  o.max_connections = 1024;
  o.max_connections_per_peer = 256;
  o.max_active_requests = 16;  // a scrape takes milliseconds
  o.header_timeout_seconds = 5;
  o.idle_timeout_seconds = 30;  // longer than Prometheus's usual 15 s interval
  o.write_timeout_seconds = 10;
  o.io_threads = 1;
  o.max_body_bytes = 4096;  // a GET has none
  return o;
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, const ServiceMetrics* metrics) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint(metrics));
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(Options(listen), endpoint.get());
  if (!server.ok()) {
    return absl::Status(server.status().code(),
                        absl::StrCat("--metrics-listen: ", server.status().message()));
  }
  endpoint->server_ = std::move(*server);
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (server_ != nullptr) server_->Stop(2);
}

void MetricsEndpoint::Handle(const HttpRequest& request, HttpResponder& out) {
  constexpr char kJson[] = "application/json";
  if (request.path != "/metrics") {
    out.Send(404, kJson, R"({"error": "no such path; scrape /metrics"})");
    return;
  }
  if (request.method != "GET" && request.method != "HEAD") {
    out.Send(405, kJson, R"({"error": "/metrics takes GET"})", {{"Allow", "GET, HEAD"}});
    return;
  }
  out.Send(200, "text/plain; version=0.0.4; charset=utf-8", metrics_->Serialize());
}

}  // namespace dllm
