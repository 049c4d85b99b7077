// The HTTP server's internals, shared by its two halves and by nothing
// else: http_server.cc (accepting, the connection limits, eviction, stop)
// and http_connection.cc (one connection: reading requests, the deadlines,
// writing responses and event streams). The limits themselves are
// described in http_server.h.
#ifndef DLLM_SERVICE_HTTP_HTTP_TRANSPORT_H_
#define DLLM_SERVICE_HTTP_HTTP_TRANSPORT_H_

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/http/http_server.h"

namespace dllm {

// Beast and Asio by their short names, in the server's two sources only.
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// Request line plus headers; more is 431.
constexpr uint32_t kHeaderLimitBytes = 16 << 10;
// What a connection buffers at once: a head, or the body passing through on
// its way into the request. Also the bound on a chunked body's trailer,
// which Beast parses without the head's limit (a trailer field of 64 KiB or
// more throws from inside the parser, and the client got no reply).
constexpr size_t kReadBufferBytes = 2 * kHeaderLimitBytes;
// How long a refused client gets to finish sending before the close: closing
// a socket with unread bytes sends a reset, which can lose the response.
constexpr auto kDrainBeforeClose = std::chrono::milliseconds(200);
// How long a connection must have waited idle before a new one may take its
// place (see HttpServer::Impl::TakeOldestIdle).
constexpr auto kMinIdleBeforeEviction = std::chrono::seconds(1);
// How long a request must have been arriving before, under pressure, it
// may be shed for a new connection: a client with a request sends it in
// one go.
constexpr auto kMinReadingBeforeShedding = std::chrono::seconds(1);
// A request body from which on its handler's thread hands freed memory back
// to the system when done.
constexpr size_t kTrimAfterBodyBytes = 256 << 10;

// The server's own error responses carry fixed texts only, so they are
// valid JSON without an encoder.
std::string TransportErrorBody(const char* message, const char* code);
// A reason phrase Beast does not know (499), else null.
const char* ReasonOf(int status);
// poll(2) on one descriptor, without waiting: its revents.
short PollNow(int fd, short events);
// The average rate (bytes a second) at which a request arrived on `fd`
// since `since`, from TcpBytesReceived and its value then; -1 when the
// kernel does not say.
double ArrivalRate(int fd, Clock::time_point since, int64_t bytes_before, Clock::time_point now);

// A request head whose body framing cannot be trusted (RFC 9112 6.1-6.3):
// read as it was, its body would run as the next request on the connection
// (request smuggling). Status 0 when the head is sound.
struct FramingProblem {
  int status = 0;
  const char* message = "";
  const char* code = "";
};

template <class Fields>
FramingProblem CheckFraming(const http::request_header<Fields>& head) {
  if (head.count(http::field::host) > 1) {
    return {400, "more than one Host header", "bad_request"};
  }
  if (head.count(http::field::transfer_encoding) == 0) return {};
  if (head.version() < 11) {
    return {400, "Transfer-Encoding in an HTTP/1.0 request", "bad_request"};
  }
  if (head.count(http::field::content_length) > 0) {
    return {400, "both Transfer-Encoding and Content-Length", "bad_request"};
  }
  // The codings of every Transfer-Encoding field, in order.
  std::vector<std::string> codings;
  const auto fields = head.equal_range(http::field::transfer_encoding);
  for (auto field = fields.first; field != fields.second; ++field) {
    for (absl::string_view coding :
         absl::StrSplit(absl::string_view(field->value().data(), field->value().size()), ',')) {
      coding = absl::StripAsciiWhitespace(coding.substr(0, coding.find(';')));
      if (!coding.empty()) codings.push_back(absl::AsciiStrToLower(coding));
    }
  }
  for (const std::string& coding : codings) {
    if (coding != "chunked") {
      return {501, "a transfer coding other than chunked", "unsupported_transfer_encoding"};
    }
  }
  if (codings.size() != 1) {
    return {400, "Transfer-Encoding must be chunked, once", "bad_request"};
  }
  return {};
}

// What the server's registry knows of a connection: its peer, and how to
// close it while it waits idle for its next request.
class ConnectionBase : public std::enable_shared_from_this<ConnectionBase> {
 public:
  ConnectionBase(std::shared_ptr<HttpServer::Impl> server, std::string prefix, int fd)
      : server_(std::move(server)), prefix_(std::move(prefix)), fd_(fd) {}
  virtual ~ConnectionBase();
  virtual void Start() = 0;
  // Ends an idle wait (on the connection's strand): the connection closes.
  virtual void Evict() = 0;
  // Ends a request that is arriving too slowly for the room it takes (on
  // the connection's strand): 503, then the connection closes.
  virtual void Shed() = 0;

  // The peer's network prefix (PeerPrefix), which the per-peer limit counts.
  const std::string& prefix() const { return prefix_; }
  int fd() const { return fd_; }
  // Where the connection sits in the server's idle list, while idle.
  struct IdleEntry {
    std::weak_ptr<ConnectionBase> connection;
    std::string prefix;
    Clock::time_point since;  // when it began to wait
  };
  std::optional<std::list<IdleEntry>::iterator> idle_at;
  // Where it sits in the list of connections with a request arriving.
  struct ReadingEntry {
    std::weak_ptr<ConnectionBase> connection;
    std::string prefix;
    Clock::time_point since;    // when the request's first bytes came
    int64_t bytes_before = -1;  // TcpBytesReceived before them, -1 unknown
  };
  std::optional<std::list<ReadingEntry>::iterator> reading_at;
  // Whether the connection's slot was given back (at eviction, so that a
  // connection closing in the background holds no slot); guarded by the
  // server's mu.
  bool released = false;

 protected:
  const std::shared_ptr<HttpServer::Impl> server_;
  const std::string prefix_;
  const int fd_;
};

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  HttpOptions options;
  HttpHandler* handler = nullptr;
  std::unique_ptr<ssl::context> tls;
  net::io_context io;
  // Accepting and Stop()'s closing run on one strand: the acceptor is not
  // safe to use from two threads at once.
  net::strand<net::io_context::executor_type> accept_strand = net::make_strand(io);
  tcp::acceptor acceptor{accept_strand};
  net::steady_timer accept_pause{accept_strand};
  int port = 0;
  std::atomic<bool> stopping{false};
  std::vector<std::thread> io_threads;

  std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu.
  int connections = 0;
  int active = 0;           // handlers running
  int handler_threads = 0;  // their threads, until they let go of the connection
  absl::flat_hash_map<std::string, int> per_peer;   // by prefix
  std::list<ConnectionBase::IdleEntry> idle;        // oldest first
  std::list<ConnectionBase::ReadingEntry> reading;  // oldest first

  void Accept();
  void OnAccept(const beast::error_code& ec, tcp::socket socket);
  void Refuse(tcp::socket socket);

  // The oldest idle connection (of prefix `peer`, or of anyone when empty), taken
  // off the idle list; null when there is none. Needs mu. The caller drops
  // it after releasing mu: it may be the last reference, whose destructor
  // takes mu.
  // Only a connection idle for kMinIdleBeforeEviction gives way (unless the
  // server is stopping): a younger one is likely a client whose request is
  // on its way. The list is in order of `since`.
  std::shared_ptr<ConnectionBase> TakeOldestIdle(const std::string& peer);

  // The connection of prefix `peer` (of anyone when empty) whose request
  // has been arriving for at least kMinReadingBeforeShedding at the lowest
  // average rate, taken off the reading list with its slot given back (as
  // TakeOldestIdle); null when there is none.
  std::shared_ptr<ConnectionBase> TakeSlowestReading(const std::string& peer);

  void MarkIdle(const std::shared_ptr<ConnectionBase>& c) {
    std::lock_guard<std::mutex> lock(mu);
    c->idle_at = idle.insert(idle.end(), {c, c->prefix(), Clock::now()});
    ReportLocked();
  }
  // A request began to arrive, `bytes_before` (TcpBytesReceived) before it.
  void MarkReading(const std::shared_ptr<ConnectionBase>& c, int64_t bytes_before) {
    std::lock_guard<std::mutex> lock(mu);
    if (c->released || c->reading_at) return;
    c->reading_at = reading.insert(reading.end(), {c, c->prefix(), Clock::now(), bytes_before});
  }
  // The request was read, refused or cut off.
  void DoneReading(ConnectionBase& c) {
    std::lock_guard<std::mutex> lock(mu);
    if (!c.reading_at) return;
    reading.erase(*c.reading_at);
    c.reading_at.reset();
  }
  // False when the connection was taken off the list to be evicted.
  bool MarkBusy(ConnectionBase& c) {
    std::lock_guard<std::mutex> lock(mu);
    if (!c.idle_at) return false;
    idle.erase(*c.idle_at);
    c.idle_at.reset();
    ReportLocked();
    return true;
  }
  bool Busy() {
    std::lock_guard<std::mutex> lock(mu);
    return connections * 4 >= options.max_connections * 3;
  }
  bool TryStartHandler() {
    std::lock_guard<std::mutex> lock(mu);
    if (active >= options.max_active_requests) return false;
    ++active;
    return true;
  }
  void HandlerThreadStarted() {
    std::lock_guard<std::mutex> lock(mu);
    ++handler_threads;
  }
  void HandlerThreadEnded() {
    std::lock_guard<std::mutex> lock(mu);
    --handler_threads;
    cv.notify_all();
  }
  void EndHandler() {
    std::lock_guard<std::mutex> lock(mu);
    --active;
    cv.notify_all();
  }
  // Gives back a connection's slot, once. Needs mu.
  void ReleaseLocked(ConnectionBase& c) {
    if (c.released) return;
    c.released = true;
    --connections;
    if (--per_peer[c.prefix()] <= 0) per_peer.erase(c.prefix());
    if (c.reading_at) {
      reading.erase(*c.reading_at);
      c.reading_at.reset();
    }
    ReportLocked();
    cv.notify_all();
  }
  // Tells the handler how many connections are open and idle. Needs mu.
  void ReportLocked() { handler->OnConnections(connections, static_cast<int>(idle.size())); }
  void Release(ConnectionBase& c) {
    std::lock_guard<std::mutex> lock(mu);
    ReleaseLocked(c);
  }
};

// A connection on `socket` (TLS when `server` has a context), registered
// with the server by its caller; not started yet.
std::shared_ptr<ConnectionBase> MakeConnection(std::shared_ptr<HttpServer::Impl> server,
                                               tcp::socket socket, std::string prefix,
                                               std::string peer);

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_HTTP_TRANSPORT_H_
