#include "service/http/http_server.h"

#include <malloc.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <future>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/http/socket_stats.h"

namespace dllm {
namespace {

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
std::string TransportErrorBody(const char* message, const char* code) {
  return absl::StrCat(R"({"error": {"message": ")", message,
                      R"(", "type": "invalid_request_error", "param": null, "code": ")", code,
                      "\"}}");
}

const char* ReasonOf(int status) {
  switch (status) {
    case 499:
      return "Client Closed Request";
    default:
      return nullptr;
  }
}

// poll(2) on one descriptor, without waiting: its revents.
short PollNow(int fd, short events) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, 0) > 0 ? p.revents : 0;
}

// The average rate (bytes a second) at which a request arrived on `fd`
// since `since`, from TcpBytesReceived and its value then; -1 when the
// kernel does not say.
double ArrivalRate(int fd, Clock::time_point since, int64_t bytes_before, Clock::time_point now) {
  const int64_t bytes = TcpBytesReceived(fd);
  const double seconds = std::chrono::duration<double>(now - since).count();
  if (bytes < 0 || bytes_before < 0 || seconds <= 0) return -1;
  return static_cast<double>(bytes - bytes_before) / seconds;
}

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

}  // namespace

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
  std::shared_ptr<ConnectionBase> TakeOldestIdle(const std::string& peer) {
    const Clock::time_point old_enough = Clock::now() - kMinIdleBeforeEviction;
    for (auto it = idle.begin(); it != idle.end();) {
      if (!stopping.load() && it->since > old_enough) break;
      if (!peer.empty() && it->prefix != peer) {
        ++it;
        continue;
      }
      std::shared_ptr<ConnectionBase> c = it->connection.lock();
      it = idle.erase(it);
      if (c == nullptr) continue;  // already gone (its slot went with it)
      c->idle_at.reset();
      ReleaseLocked(*c);
      return c;
    }
    return nullptr;
  }

  // The connection of prefix `peer` (of anyone when empty) whose request
  // has been arriving for at least kMinReadingBeforeShedding at the lowest
  // average rate, taken off the reading list with its slot given back (as
  // TakeOldestIdle); null when there is none.
  std::shared_ptr<ConnectionBase> TakeSlowestReading(const std::string& peer) {
    const Clock::time_point now = Clock::now();
    auto slowest = reading.end();
    double slowest_rate = 0;
    for (auto it = reading.begin(); it != reading.end(); ++it) {
      if (it->since > now - kMinReadingBeforeShedding) break;  // in order of `since`
      if (!peer.empty() && it->prefix != peer) continue;
      std::shared_ptr<ConnectionBase> c = it->connection.lock();
      if (c == nullptr) continue;
      // Unknown counts as slowest: nothing shows it arriving.
      const double rate = std::max(0.0, ArrivalRate(c->fd(), it->since, it->bytes_before, now));
      if (slowest == reading.end() || rate < slowest_rate) {
        slowest = it;
        slowest_rate = rate;
      }
    }
    if (slowest == reading.end()) return nullptr;
    std::shared_ptr<ConnectionBase> c = slowest->connection.lock();
    reading.erase(slowest);
    if (c == nullptr) return nullptr;
    c->reading_at.reset();
    ReleaseLocked(*c);
    return c;
  }

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

ConnectionBase::~ConnectionBase() { server_->Release(*this); }

namespace {

// One client connection: requests one after another (keep-alive). Reads and
// the server's own answers run on the connection's strand; a handler runs
// on its own thread and writes through the strand, waiting for each write.
template <class Stream>
class Connection final : public ConnectionBase, public HttpResponder {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Connection(std::shared_ptr<HttpServer::Impl> server, tcp::socket socket, ssl::context* tls,
             std::string prefix, std::string peer)
      : ConnectionBase(std::move(server), std::move(prefix), socket.native_handle()),
        stream_(MakeStream(std::move(socket), tls)),
        read_timer_(stream_.get_executor()),
        peer_(std::move(peer)) {}

  void Start() override {
    net::dispatch(stream_.get_executor(), [self = Self()] {
      if constexpr (kTls) {
        beast::get_lowest_layer(self->stream_)
            .expires_after(std::chrono::seconds(self->server_->options.header_timeout_seconds));
        self->stream_.async_handshake(ssl::stream_base::server,
                                      [self](const beast::error_code& ec) {
                                        beast::get_lowest_layer(self->stream_).expires_never();
                                        if (ec) return self->Close();
                                        self->WaitForRequest(true);
                                      });
      } else {
        self->WaitForRequest(true);
      }
    });
  }

  void Evict() override {
    net::post(stream_.get_executor(), [self = Self()] {
      beast::error_code ec;
      beast::get_lowest_layer(self->stream_).socket().cancel(ec);
    });
  }

  void Shed() override {
    net::post(stream_.get_executor(), [self = Self()] {
      // Read meanwhile: its handler runs, and the connection closes after.
      self->shed_ = true;
      if (!self->parser_) return;
      beast::error_code ec;
      beast::get_lowest_layer(self->stream_).socket().cancel(ec);
    });
  }

  // --- HttpResponder: called on the handler's thread ---
  bool Send(int status, absl::string_view content_type, std::string body,
            const HttpHeaders& headers) override {
    if (broken_) return false;
    // On this thread's stack: OnStrand waits for the write to end.
    http::response<http::string_body> res;
    res.version(version_);
    res.result(static_cast<unsigned>(status));
    if (const char* reason = ReasonOf(status)) res.reason(reason);
    res.set(http::field::server, "dllm");
    res.set(http::field::content_type, std::string(content_type));
    for (const auto& [name, value] : headers) res.set(name, value);
    // A client that failed authentication gets no second try on this
    // connection (it cost a connection slot to make).
    if (status == 401) keep_alive_ = false;
    res.keep_alive(keep_alive_ && !server_->stopping.load());
    keep_alive_ = res.keep_alive();
    res.body() = std::move(body);
    res.prepare_payload();
    http::response_serializer<http::string_body> serializer(res);
    return Wrote(OnStrand([this, &serializer](auto done) {
      if (head_request_) {
        http::async_write_header(stream_, serializer, std::move(done));
      } else {
        http::async_write(stream_, serializer, std::move(done));
      }
    }));
  }

  bool StartEvents(const HttpHeaders& headers) override {
    if (broken_) return false;
    events_head_.emplace(http::status::ok, version_);
    http::response<http::empty_body>& head = *events_head_;
    head.set(http::field::server, "dllm");
    head.set(http::field::content_type, "text/event-stream");
    head.set(http::field::cache_control, "no-cache");
    // nginx: pass events through as they come instead of buffering them.
    head.set("X-Accel-Buffering", "no");
    for (const auto& [name, value] : headers) head.set(name, value);
    // HTTP/1.0 has no chunked encoding: the stream ends with the connection.
    chunked_ = version_ >= 11;
    keep_alive_ = keep_alive_ && chunked_;
    head.keep_alive(keep_alive_);
    if (chunked_) head.chunked(true);
    events_serializer_.emplace(head);
    return Wrote(OnStrand([this](auto done) {
      http::async_write_header(stream_, *events_serializer_, std::move(done));
    }));
  }

  bool SendEvents(absl::string_view text) override {
    if (broken_ || text.empty()) return !broken_;
    const net::const_buffer bytes(text.data(), text.size());
    if (!chunked_) {
      return Wrote(OnStrand(
          [this, bytes](auto done) { net::async_write(stream_, bytes, std::move(done)); }));
    }
    return Wrote(OnStrand([this, bytes](auto done) {
      net::async_write(stream_, http::make_chunk(bytes), std::move(done));
    }));
  }

  void EndEvents() override {
    if (!broken_ && chunked_) {
      Wrote(OnStrand([this](auto done) {
        net::async_write(stream_, http::make_chunk_last(), std::move(done));
      }));
    }
    if (!chunked_) keep_alive_ = false;
    events_serializer_.reset();
    events_head_.reset();
  }

  // A client that closed its end may be gone, or may only have half-closed
  // after sending (it still reads): an HTTP/1.1 request whose response has
  // not begun gets one interim "100 Continue" (clients skip 1xx responses)
  // to tell them apart: a closed socket answers it with a reset, which the
  // next look sees. Once events flow, their own writes fail on a closed
  // socket; an ended read half counts as gone there, and for HTTP/1.0.
  bool ClientGone() override {
    if (broken_) return true;
    const short r = PollNow(fd(), POLLRDHUP);
    if (r & (POLLHUP | POLLERR)) return true;
    if ((r & POLLRDHUP) == 0) return false;
    if (events_serializer_ || version_ < 11) return true;
    if (!probed_) {
      probed_ = true;
      static constexpr char kProbe[] = "HTTP/1.1 100 Continue\r\n\r\n";
      return !Wrote(OnStrand([this](auto done) {
        net::async_write(stream_, net::buffer(kProbe, sizeof(kProbe) - 1), std::move(done));
      }));
    }
    return false;
  }

 private:
  static Stream MakeStream(tcp::socket socket, ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(beast::tcp_stream(std::move(socket)), *tls);
    } else {
      return Stream(std::move(socket));
    }
  }

  std::shared_ptr<Connection> Self() {
    return std::static_pointer_cast<Connection>(shared_from_this());
  }

  // Runs one asynchronous write on the strand, from the handler's thread,
  // and waits for it; the write is cut off (the socket closed) after
  // write_timeout_seconds.
  template <class Start>
  beast::error_code OnStrand(Start start) {
    auto done = std::make_shared<std::promise<beast::error_code>>();
    std::future<beast::error_code> result = done->get_future();
    net::post(stream_.get_executor(), [self = Self(), start = std::move(start), done]() mutable {
      beast::get_lowest_layer(self->stream_)
          .expires_after(std::chrono::seconds(self->server_->options.write_timeout_seconds));
      start([self, done](const beast::error_code& ec, auto&&...) {
        beast::get_lowest_layer(self->stream_).expires_never();
        done->set_value(ec);
      });
    });
    return result.get();
  }

  bool Wrote(const beast::error_code& ec) {
    if (ec) broken_ = true;
    return !ec;
  }

  // Waits for the first bytes of the next request (the first one: within
  // the header timeout), idle: the server may close the connection to make
  // room for another.
  void WaitForRequest(bool first) {
    if (server_->stopping.load()) return Close();
    if (buffer_.size() > 0) return ReadHead();
    buffer_.shrink_to_fit();  // an idle connection keeps no request's bytes
    const HttpOptions& o = server_->options;
    const int seconds = first ? o.header_timeout_seconds
                        : server_->Busy()
                            ? std::min(o.idle_timeout_seconds, o.busy_idle_timeout_seconds)
                            : o.idle_timeout_seconds;
    server_->MarkIdle(Self());
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(seconds));
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = Self()](const beast::error_code& ec, size_t n) {
                              beast::get_lowest_layer(self->stream_).expires_never();
                              const bool evicted = !self->server_->MarkBusy(*self);
                              if (ec || evicted) return self->Close();
                              self->buffer_.commit(n);
                              self->ReadHead();
                            });
  }

  // Arms the deadlines of the request whose first bytes are in: the whole
  // of it within header_timeout_seconds, and after the grace an average of
  // min_request_bytes_per_second, checked each second; at either, the read
  // is cancelled and answered 408. `bytes_before`: TcpBytesReceived before
  // the request's first byte (-1: unknown, no rate check).
  void ArmRequestDeadline(int64_t bytes_before) {
    timed_out_ = false;
    ++requests_read_;
    request_started_ = Clock::now();
    request_bytes_before_ = bytes_before;
    server_->MarkReading(Self(), bytes_before);
    CheckRequestProgress(requests_read_);
  }
  void CheckRequestProgress(uint64_t request) {
    const HttpOptions& o = server_->options;
    const auto age = Clock::now() - request_started_;
    const auto deadline = std::chrono::seconds(o.header_timeout_seconds);
    if (age >= deadline) return CutOffRequest();
    const auto grace = std::chrono::seconds(o.slow_request_grace_seconds);
    if (age >= grace) {
      const double rate =
          ArrivalRate(fd(), request_started_, request_bytes_before_, request_started_ + age);
      if (rate >= 0 && rate < o.min_request_bytes_per_second) return CutOffRequest();
    }
    read_timer_.expires_after(std::min<Clock::duration>(
        deadline - age, age < grace ? grace - age : Clock::duration(std::chrono::seconds(1))));
    read_timer_.async_wait([self = Self(), request](const beast::error_code& ec) {
      // Cancelled, or expired just as that request was read in time (a
      // handler already queued cannot be cancelled): nothing to cut off.
      if (ec || request != self->requests_read_ || !self->parser_) return;
      self->CheckRequestProgress(request);
    });
  }
  void CutOffRequest() {
    timed_out_ = true;
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().cancel(ignored);
  }

  void ReadHead() {
    const HttpOptions& o = server_->options;
    parser_.emplace();
    parser_->header_limit(kHeaderLimitBytes);
    parser_->body_limit(o.max_body_bytes);
    const int64_t received = TcpBytesReceived(fd());
    ArmRequestDeadline(received < 0 ? -1 : received - static_cast<int64_t>(buffer_.size()));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = Self()](const beast::error_code& ec, size_t) { self->OnHead(ec); });
  }

  void OnHead(const beast::error_code& ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof) {
      read_timer_.cancel();
      return Close();
    }
    if (ec) return RefuseRead(ec);
    const auto& head = parser_->get();
    version_ = head.version();
    keep_alive_ = head.keep_alive();
    head_request_ = head.method() == http::verb::head;
    if (const auto length = parser_->content_length();
        length && *length > server_->options.max_body_bytes) {
      return RefuseRead(http::error::body_limit);
    }
    if (const FramingProblem problem = CheckFraming(head); problem.status != 0) {
      read_timer_.cancel();
      parser_.reset();
      server_->DoneReading(*this);
      return Refuse(problem.status, problem.message, problem.code);
    }
    if (parser_->is_done()) return OnBody({});
    auto read_body = [self = Self()] {
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](const beast::error_code& ec, size_t) { self->OnBody(ec); });
    };
    if (beast::iequals(head[http::field::expect], "100-continue")) {
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue, sizeof(kContinue) - 1),
                       [self = Self(), read_body](const beast::error_code& ec, size_t) {
                         if (ec) {
                           self->read_timer_.cancel();
                           return self->Close();
                         }
                         read_body();
                       });
      return;
    }
    read_body();
  }

  void OnBody(const beast::error_code& ec) {
    if (ec) return RefuseRead(ec);
    read_timer_.cancel();
    server_->DoneReading(*this);
    http::request<http::string_body> request = parser_->release();
    parser_.reset();
    auto out = std::make_shared<HttpRequest>();
    out->method = std::string(request.method_string());
    const std::string target(request.target());
    out->path = target.substr(0, target.find('?'));
    out->authorization = std::string(request[http::field::authorization]);
    out->host = std::string(request[http::field::host]);
    out->origin = std::string(request[http::field::origin]);
    out->content_type = std::string(request[http::field::content_type]);
    out->body = std::move(request.body());
    out->peer = peer_;
    probed_ = false;
    if (!server_->TryStartHandler()) {
      return Refuse(503, "the server is handling too many requests; retry", "server_busy",
                    /*retry=*/true);
    }
    server_->HandlerThreadStarted();
    const bool large = out->body.size() >= kTrimAfterBodyBytes;
    // The I/O threads return once the io_context has no work left, which
    // can happen while a handler is between two writes (Stop() has closed
    // the acceptor and the idle connections): its next write, posted to a
    // context nobody runs, would then wait forever and the client would
    // never get the end of its stream. The handler holds the context open
    // until its last post.
    auto work = net::make_work_guard(server_->io);
    std::thread([self = Self(), out, server = server_, large, work = std::move(work)]() mutable {
      try {
        self->server_->handler->Handle(*out, *self);
      } catch (const std::exception& e) {
        // A handler's failure ends that connection only.
        std::fprintf(stderr, "dllm-server: http request failed: %s\n", e.what());
        self->broken_ = true;
      }
      net::post(self->stream_.get_executor(), [self] {
        self->server_->EndHandler();
        if (self->broken_ || !self->keep_alive_ || self->shed_) return self->Close();
        self->WaitForRequest(false);
      });
      work.reset();  // the post above is work of its own
      // Nothing of the connection is held past this point, so that Stop()
      // can wait for every handler thread to be done with it.
      self.reset();
      out.reset();
      // What a large body and its parse took is free now, but glibc keeps
      // freed pages in the thread's arena: give them back, so that hostile
      // bodies one after another do not ratchet the RSS up (issue #34 R6).
      if (large) malloc_trim(0);
      server->HandlerThreadEnded();
    }).detach();
  }

  // The answer to a request that could not be read; the connection then
  // closes.
  void RefuseRead(const beast::error_code& ec) {
    read_timer_.cancel();
    parser_.reset();
    server_->DoneReading(*this);
    if (shed_) {
      Refuse(503,
             "the server needed this connection for another while this request was still "
             "arriving slowly; retry",
             "server_busy", /*retry=*/true);
    } else if (timed_out_) {
      Refuse(408, "the request was not received in time", "request_timeout");
    } else if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      Refuse(431, "the request head (or a chunked body's trailer) is too large",
             "headers_too_large");
    } else if (ec == http::error::body_limit) {
      Refuse(413, "the request body exceeds the server's limit", "request_too_large");
    } else if (ec == net::error::operation_aborted || ec == net::error::connection_reset ||
               ec == net::error::eof || ec == http::error::partial_message) {
      Close();  // evicted, or the client went away mid-request: nobody to answer
    } else {
      Refuse(400, "malformed HTTP request", "bad_request");
    }
  }

  // An error the server answers itself, on the strand; the connection then
  // closes. Counted once written.
  void Refuse(int status, const char* message, const char* code, bool retry = false) {
    keep_alive_ = false;
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(version_);
    res->result(static_cast<unsigned>(status));
    res->set(http::field::server, "dllm");
    res->set(http::field::content_type, "application/json");
    if (retry) res->set(http::field::retry_after, "1");
    res->keep_alive(false);
    if (!head_request_) res->body() = TransportErrorBody(message, code);
    res->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(
        std::chrono::seconds(server_->options.write_timeout_seconds));
    http::async_write(stream_, *res,
                      [self = Self(), res, status](const beast::error_code& ec, size_t) {
                        beast::get_lowest_layer(self->stream_).expires_never();
                        if (!ec) self->server_->handler->OnTransportResponse(status);
                        self->Close();
                      });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    read_timer_.cancel();
    if constexpr (kTls) {
      if (!broken_) {
        beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(2));
        stream_.async_shutdown([self = Self()](const beast::error_code&) { self->CloseSocket(); });
        return;
      }
    }
    CloseSocket();
  }

  // Half-closes, lets the client's last bytes arrive for a moment (a reset
  // could lose the response just written), then closes.
  void CloseSocket() {
    tcp::socket& socket = beast::get_lowest_layer(stream_).socket();
    beast::error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) {
      socket.close(ec);
      return;
    }
    beast::get_lowest_layer(stream_).expires_after(kDrainBeforeClose);
    auto drain = std::make_shared<std::array<char, 4096>>();
    DrainThenClose(drain);
  }
  void DrainThenClose(const std::shared_ptr<std::array<char, 4096>>& drain) {
    beast::get_lowest_layer(stream_).async_read_some(
        net::buffer(*drain), [self = Self(), drain](const beast::error_code& ec, size_t) {
          if (!ec) return self->DrainThenClose(drain);
          beast::error_code ignored;
          beast::get_lowest_layer(self->stream_).socket().close(ignored);
        });
  }

  Stream stream_;
  net::steady_timer read_timer_;
  const std::string peer_;
  beast::flat_buffer buffer_{kReadBufferBytes};
  std::optional<http::request_parser<http::string_body>> parser_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_request_ = false;
  std::atomic<bool> broken_{false};
  bool chunked_ = true;
  bool timed_out_ = false;
  bool shed_ = false;  // its slot was given to a new connection
  Clock::time_point request_started_;
  int64_t request_bytes_before_ = -1;
  bool probed_ = false;         // this request's half-close probe was sent
  uint64_t requests_read_ = 0;  // requests whose reading began
  bool closed_ = false;
  std::optional<http::response<http::empty_body>> events_head_;
  std::optional<http::response_serializer<http::empty_body>> events_serializer_;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(io), [self = shared_from_this()](
                                                  const beast::error_code& ec, tcp::socket socket) {
    self->OnAccept(ec, std::move(socket));
  });
}

void HttpServer::Impl::OnAccept(const beast::error_code& ec, tcp::socket socket) {
  if (stopping.load() || ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors (or another transient failure): let connections
    // end before accepting more.
    accept_pause.expires_after(std::chrono::milliseconds(50));
    accept_pause.async_wait(
        [self = shared_from_this()](const beast::error_code&) { self->Accept(); });
    return;
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  const tcp::endpoint remote = socket.remote_endpoint(ignored);
  const std::string address = ignored ? "unknown" : remote.address().to_string();
  const std::string prefix = ignored ? "unknown" : PeerPrefix(address);
  const std::string peer = absl::StrCat(address, ":", remote.port());
  std::shared_ptr<ConnectionBase> idle_victim, slow_victim;
  bool refuse = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto mine = [&] {
      const auto it = per_peer.find(prefix);
      return it == per_peer.end() ? 0 : it->second;
    };
    // Over a limit, the oldest idle connection gives its slot back (it
    // closes in the background), else the slowest request still arriving;
    // with neither, the new one is refused.
    const std::string over = mine() >= options.max_connections_per_peer ? prefix : "";
    if (!over.empty() || connections >= options.max_connections) {
      idle_victim = TakeOldestIdle(over);
      if (idle_victim == nullptr) slow_victim = TakeSlowestReading(over);
    }
    refuse = mine() >= options.max_connections_per_peer || connections >= options.max_connections;
    if (!refuse) {
      ++connections;
      ++per_peer[prefix];
      ReportLocked();
    }
  }
  if (idle_victim != nullptr) idle_victim->Evict();
  if (slow_victim != nullptr) slow_victim->Shed();
  if (refuse) {
    Refuse(std::move(socket));
  } else {
    std::shared_ptr<ConnectionBase> c;
    if (tls != nullptr) {
      c = std::make_shared<Connection<beast::ssl_stream<beast::tcp_stream>>>(
          shared_from_this(), std::move(socket), tls.get(), prefix, peer);
    } else {
      c = std::make_shared<Connection<beast::tcp_stream>>(shared_from_this(), std::move(socket),
                                                          nullptr, prefix, peer);
    }
    c->Start();
  }
  Accept();
}

// Over the connection limits with nobody idle to make room: a 503 written
// without waiting for the request, then the socket closes after a moment
// (see kDrainBeforeClose).
void HttpServer::Impl::Refuse(tcp::socket socket) {
  struct Refused {
    beast::tcp_stream stream;
    std::string response;
    std::array<char, 4096> drain;
  };
  const std::string body = TransportErrorBody("too many connections", "too_many_connections");
  auto r = std::make_shared<Refused>(Refused{beast::tcp_stream(std::move(socket)), "", {}});
  r->response = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nServer: dllm\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: ",
      body.size(), "\r\n\r\n", body);
  r->stream.expires_after(kDrainBeforeClose);
  net::async_write(r->stream, net::buffer(r->response),
                   [self = shared_from_this(), r](const beast::error_code& ec, size_t) {
                     if (!ec) self->handler->OnTransportResponse(503);
                     beast::error_code ignored;
                     r->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
                     r->stream.async_read_some(net::buffer(r->drain),
                                               [r](const beast::error_code&, size_t) {
                                                 beast::error_code ignored;
                                                 r->stream.socket().close(ignored);
                                               });
                   });
}

namespace {

// HOST:PORT, [IPv6]:PORT or localhost:PORT as an endpoint.
absl::StatusOr<tcp::endpoint> ParseListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", listen, "' is not HOST:PORT"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", listen, "': '", host, "' is not an IP address"));
  }
  return tcp::endpoint(address, static_cast<unsigned short>(port));
}

}  // namespace

std::string PeerPrefix(const std::string& address) {
  beast::error_code ec;
  const net::ip::address ip = net::ip::make_address(address, ec);
  if (ec) return address;
  net::ip::address_v4::bytes_type v4{};
  if (ip.is_v4()) {
    v4 = ip.to_v4().to_bytes();
  } else if (ip.to_v6().is_v4_mapped()) {
    v4 = net::ip::make_address_v4(net::ip::v4_mapped, ip.to_v6()).to_bytes();
  } else {
    net::ip::address_v6::bytes_type v6 = ip.to_v6().to_bytes();
    std::fill(v6.begin() + 8, v6.end(), 0);
    return absl::StrCat(net::ip::address_v6(v6).to_string(), "/64");
  }
  v4[3] = 0;
  return absl::StrCat(net::ip::address_v4(v4).to_string(), "/24");
}

bool ListensOnLoopbackOnly(const std::string& listen) {
  const absl::StatusOr<tcp::endpoint> endpoint = ParseListen(listen);
  return endpoint.ok() && endpoint->address().is_loopback();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpOptions& options,
                                                              HttpHandler* handler) {
  auto impl = std::make_shared<Impl>();
  impl->options = options;
  impl->handler = handler;
  const absl::StatusOr<tcp::endpoint> parsed = ParseListen(options.listen);
  if (!parsed.ok()) return parsed.status();
  const tcp::endpoint endpoint = *parsed;
  beast::error_code ec;
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, ": ", ec.message()));
  }
  impl->port = impl->acceptor.local_endpoint().port();
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key file");
  }
  if (!options.tls_cert_file.empty()) {
    impl->tls = std::make_unique<ssl::context>(ssl::context::tls_server);
    impl->tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1);
    impl->tls->use_certificate_chain_file(options.tls_cert_file, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-cert: cannot use ", options.tls_cert_file, ": ", ec.message()));
    }
    impl->tls->use_private_key_file(options.tls_key_file, ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-key: cannot use ", options.tls_key_file, ": ", ec.message()));
    }
  }
  impl->Accept();
  for (int i = 0; i < std::max(1, options.io_threads); ++i) {
    impl->io_threads.emplace_back([self = impl] {
      for (;;) {
        try {
          self->io.run();
          return;
        } catch (const std::exception& e) {
          // A connection's failure ends that connection only.
          std::fprintf(stderr, "dllm-server: http connection ended: %s\n", e.what());
        }
      }
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }
bool HttpServer::tls() const { return impl_->tls != nullptr; }

int HttpServer::connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->connections;
}

int HttpServer::active_requests() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->active;
}

bool HttpServer::Stop(int grace_seconds) {
  if (impl_->io_threads.empty()) return stopped_cleanly_;  // stopped before
  impl_->stopping = true;
  net::post(impl_->accept_strand, [impl = impl_] {
    beast::error_code ec;
    impl->acceptor.close(ec);
    impl->accept_pause.cancel();
    std::vector<std::shared_ptr<ConnectionBase>> idle;
    {
      std::lock_guard<std::mutex> lock(impl->mu);
      while (std::shared_ptr<ConnectionBase> c = impl->TakeOldestIdle("")) idle.push_back(c);
    }
    for (const auto& c : idle) c->Evict();
  });
  bool all_closed;
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    all_closed = impl_->cv.wait_for(lock, std::chrono::seconds(grace_seconds), [this] {
      return impl_->connections == 0 && impl_->handler_threads == 0;
    });
    if (!all_closed) {
      std::fprintf(stderr, "dllm-server: %d HTTP connections still open at shutdown\n",
                   impl_->connections);
    }
  }
  // With every connection gone the I/O threads run out of work and return;
  // otherwise they are left to the connections that outlived the grace.
  for (std::thread& t : impl_->io_threads) {
    if (all_closed) {
      t.join();
    } else {
      t.detach();
    }
  }
  impl_->io_threads.clear();
  stopped_cleanly_ = all_closed;
  return all_closed;
}

}  // namespace dllm
