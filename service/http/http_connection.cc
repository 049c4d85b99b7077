#include <malloc.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdio>
#include <exception>
#include <future>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/http/http_transport.h"
#include "service/http/socket_stats.h"

namespace dllm {

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

std::shared_ptr<ConnectionBase> MakeConnection(std::shared_ptr<HttpServer::Impl> server,
                                               tcp::socket socket, std::string prefix,
                                               std::string peer) {
  if (server->tls != nullptr) {
    ssl::context* tls = server->tls.get();
    return std::make_shared<Connection<beast::ssl_stream<beast::tcp_stream>>>(
        std::move(server), std::move(socket), tls, std::move(prefix), std::move(peer));
  }
  return std::make_shared<Connection<beast::tcp_stream>>(
      std::move(server), std::move(socket), nullptr, std::move(prefix), std::move(peer));
}

}  // namespace dllm
