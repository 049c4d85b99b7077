// HttpServer: HTTP/1.1 (optionally over TLS) on Boost.Beast's asynchronous
// model, for the OpenAI-compatible API and the Prometheus endpoint. Boost.Beast
// because the API needs what a request/response framework hides: a deadline
// on reading the whole request (a client that sends headers slowly cannot
// hold anything for long), chunked event streams written one event at a
// time, the socket itself to notice a client that went away while its
// request waits for the engine, and connection limits enforced at accept.
//
// Connections live on a small pool of I/O threads (`io_threads`): reading a
// request and waiting for the next one cost memory, not threads, so
// thousands of idle keep-alive connections shut nobody out. A request that
// has been read runs its handler on a thread of its own (a handler may block
// for minutes while it streams), at most `max_active_requests` at once.
// Limits, each answered 503 with Retry-After when nothing can give way:
// - `max_connections` open in all and `max_connections_per_peer` from one
//   network prefix (/24, /64); a new connection over either first closes
//   the oldest idle one (of that prefix, or of anyone), else sheds the
//   slowest connection whose request has been arriving for over a second
//   (answered 503), so neither idle nor trickling connections can lock out
//   a client that has a request to make;
// - a request must arrive at `min_request_bytes_per_second` on average
//   after `slow_request_grace_seconds`, else 408;
// - keep-alive waits shrink to `busy_idle_timeout_seconds` once 3/4 of
//   `max_connections` are open;
// - the whole request (head and body) within `header_timeout_seconds`, else
//   408; a response write within `write_timeout_seconds`, else the client is
//   gone; a 401 closes the connection.
// The handler sees plain requests and answers through an HttpResponder; no
// Beast type leaks out.
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
  int max_connections = 4096;             // open connections, idle ones included
  // From one network prefix: a /24 for IPv4, a /64 for IPv6 (one client
  // commonly holds a whole /64, or several addresses of a /24).
  int max_connections_per_peer = 512;
  int max_active_requests = 256;      // handlers running at once
  int header_timeout_seconds = 10;    // the whole request: head and body
  int idle_timeout_seconds = 60;      // keep-alive wait for the next request
  int busy_idle_timeout_seconds = 2;  // the same once 3/4 of max_connections are open
  int write_timeout_seconds = 30;     // one write to a client that does not read
  // A request that has begun to arrive must keep coming at this average
  // rate once it is older than the grace, else 408: a client trickling a
  // byte a second cannot hold a slot for the whole header timeout.
  int min_request_bytes_per_second = 128;
  int slow_request_grace_seconds = 2;
  int io_threads = 2;
  uint64_t max_body_bytes = 4 << 20;
  std::string tls_cert_file;  // PEM; both or neither
  std::string tls_key_file;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string path;           // the target without its query
  std::string authorization;  // the Authorization header, or empty
  std::string host;           // the Host header, or empty
  std::string origin;         // the Origin header (sent by browsers), or empty
  std::string content_type;   // the Content-Type header, or empty
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

// The network a per-peer limit counts an IP address under: its /24 for IPv4
// (an IPv4-mapped IPv6 address counts as IPv4), its /64 for IPv6, the
// block one client commonly holds whole ("10.1.2.0/24", "2001:db8::/64");
// text that is no address comes back as it is.
std::string PeerPrefix(const std::string& address);

// Whether `listen` (HttpOptions::listen) binds a loopback address only.
bool ListensOnLoopbackOnly(const std::string& listen);

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Called on a thread of the request's own; may block while it streams.
  virtual void Handle(const HttpRequest& request, HttpResponder& responder) = 0;
  // Counts a response the server made itself (408, 413, 431, 503, ...),
  // once it was written.
  virtual void OnTransportResponse(int status) = 0;
  // The connections open, and of those idle, whenever either changes
  // (called under the server's lock: keep it short).
  virtual void OnConnections(int /*open*/, int /*idle*/) {}
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
  // Open connections and running handlers now (for tests and logs).
  int connections() const;
  int active_requests() const;
  // Stops accepting, closes idle connections, lets each running request
  // finish its response (streams end when their requests do) and waits for
  // them, at most `grace_seconds`. False when some were still running then
  // (their handler must then outlive the server).
  bool Stop(int grace_seconds = 10);

  struct Impl;

 private:
  explicit HttpServer(std::shared_ptr<Impl> impl);
  // Shared with the I/O and handler threads, which may end after Stop()
  // gave up on them.
  std::shared_ptr<Impl> impl_;
  bool stopped_cleanly_ = true;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_HTTP_SERVER_H_
