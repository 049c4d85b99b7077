// HttpServer: HTTP/1.1 (optionally over TLS) on Boost.Beast, for the
// OpenAI-compatible API. Boost.Beast because the API needs what a
// request/response framework hides: a deadline on reading the whole request
// head (a client that sends headers slowly cannot hold a thread), chunked
// event streams written one event at a time, the socket itself to notice a
// client that went away while its request waits for the engine, and a
// connection limit enforced at accept.
//
// One thread per connection, up to `max_connections`; one more is answered
// 503 at once and closed. Each connection runs its socket operations on its
// own io_context, one at a time, each under a deadline. Between requests a
// connection waits at most `idle_timeout_seconds`. The handler sees plain
// requests and answers through an HttpResponder; no Beast type leaks out.
#ifndef DLLM_SERVICE_HTTP_HTTP_SERVER_H_
#define DLLM_SERVICE_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dllm {

struct HttpOptions {
  std::string listen = "127.0.0.1:8080";  // port 0 picks a free one
  int max_connections = 64;
  int header_timeout_seconds = 10;  // the whole request: head and body
  int idle_timeout_seconds = 60;    // keep-alive wait for the next request
  int write_timeout_seconds = 30;   // one write to a client that does not read
  uint64_t max_body_bytes = 4 << 20;
  std::string tls_cert_file;  // PEM; both or neither
  std::string tls_key_file;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::string authorization;  // the Authorization header, or empty
  std::string body;
  std::string peer;  // "ADDRESS:PORT"
};

// How a handler answers one request. Every call returns false once the
// client is gone (a failed or timed-out write).
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  // A whole response.
  virtual bool Send(int status, absl::string_view content_type, std::string body,
                    const HttpHeaders& headers = {}) = 0;
  // A text/event-stream: 200 and the head now, then any number of
  // SendEvents, then EndEvents.
  virtual bool StartEvents(const HttpHeaders& headers = {}) = 0;
  virtual bool SendEvents(absl::string_view text) = 0;
  virtual void EndEvents() = 0;
  // Whether the client closed its end of the connection; never blocks.
  virtual bool ClientGone() = 0;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Called on the connection's thread; may block while it streams.
  virtual void Handle(const HttpRequest& request, HttpResponder& responder) = 0;
  // Counts a response the server made itself (413, 431, 503 at accept, ...).
  virtual void OnTransportResponse(int status) = 0;
};

// Thread-safe.
class HttpServer {
 public:
  // Binds and starts accepting. `handler` (non-owning) outlives the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpOptions& options,
                                                           HttpHandler* handler);
  ~HttpServer();  // Stop()

  int port() const;
  bool tls() const;
  // Stops accepting, lets each connection finish the response it is
  // writing (streams end when their requests do) and waits for the
  // connection threads, at most `grace_seconds`.
  void Stop(int grace_seconds = 10);

  struct Impl;

 private:
  explicit HttpServer(std::shared_ptr<Impl> impl);
  // Shared with the connection threads, which may end after Stop() gave up.
  std::shared_ptr<Impl> impl_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_HTTP_SERVER_H_
