// The Prometheus endpoint: GET /metrics on a port of its own, served by the
// same asynchronous HttpServer as the API, so idle or slow connections cost
// memory, not the scrape (civetweb's 16 threads could be held by a few
// dozen reconnecting clients; issue #25 N5). The text is
// ServiceMetrics::Serialize(): prometheus-cpp's own text serializer.
#ifndef DLLM_SERVICE_HTTP_METRICS_ENDPOINT_H_
#define DLLM_SERVICE_HTTP_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/http/http_server.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

class MetricsEndpoint final : public HttpHandler {
 public:
  // Listens on `listen` (HOST:PORT, [IPv6]:PORT; port 0 picks one).
  // `metrics` (non-owning) outlives the endpoint.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& listen,
                                                                const ServiceMetrics* metrics);
  ~MetricsEndpoint() override;

  int port() const { return server_->port(); }
  // The HTTP settings the endpoint runs with: small requests, short waits.
  static HttpOptions Options(const std::string& listen);

  void Handle(const HttpRequest& request, HttpResponder& out) override;
  void OnTransportResponse(int) override {}

 private:
  explicit MetricsEndpoint(const ServiceMetrics* metrics) : metrics_(metrics) {}

  const ServiceMetrics* const metrics_;
  std::unique_ptr<HttpServer> server_;  // stopped first on destruction
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_METRICS_ENDPOINT_H_
