#include "service/http/http_server.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// Request line plus headers; a larger head is answered 431.
constexpr uint32_t kHeaderLimitBytes = 16 << 10;
// How often a waiting connection looks at the stop flag.
constexpr int kPollSliceMs = 200;

// poll(2) on one descriptor: its revents, 0 on timeout.
short PollFd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, timeout_ms) > 0 ? p.revents : 0;
}

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

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  HttpOptions options;
  HttpHandler* handler = nullptr;
  std::unique_ptr<ssl::context> tls;
  net::io_context accept_context;
  tcp::acceptor acceptor{accept_context};
  int port = 0;
  std::atomic<bool> stopping{false};
  std::thread accept_thread;

  std::mutex mu;
  std::condition_variable cv;
  int connections = 0;  // guarded by mu

  void AcceptLoop();
  void Refuse(int fd);
  void RunConnection(int fd);
};

namespace {

// One client connection: requests one after another (keep-alive), each
// read under one deadline and answered through HttpResponder.
template <class Stream>
class Connection final : public HttpResponder {
 public:
  Connection(HttpServer::Impl& server, net::io_context& context, Stream& stream, int fd,
             std::string peer)
      : server_(server), context_(context), stream_(stream), fd_(fd), peer_(std::move(peer)) {}

  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  void Serve() {
    const HttpOptions& o = server_.options;
    if constexpr (kTls) {
      const beast::error_code ec = Await(
          [&](auto done) { stream_.async_handshake(ssl::stream_base::server, std::move(done)); },
          Clock::now() + std::chrono::seconds(o.header_timeout_seconds));
      if (ec) return;
    }
    bool first = true;
    while (!server_.stopping.load()) {
      // TLS 1.3 clients send their first request with the handshake's last
      // flight, so it may already sit in the TLS layer, where poll() cannot
      // see it: read it at once (under the same deadline).
      const bool read_now = buffer_.size() > 0 || (first && kTls);
      if (!read_now &&
          !WaitForRequest(first ? o.header_timeout_seconds : o.idle_timeout_seconds)) {
        break;
      }
      first = false;
      HttpRequest request;
      if (!ReadRequest(&request)) break;
      server_.handler->Handle(request, *this);
      if (broken_ || !keep_alive_) break;
    }
    Shutdown();
  }

  bool Send(int status, absl::string_view content_type, std::string body,
            const HttpHeaders& headers) override {
    if (broken_) return false;
    http::response<http::string_body> res;
    res.version(version_);
    res.result(static_cast<unsigned>(status));
    if (const char* reason = ReasonOf(status)) res.reason(reason);
    res.set(http::field::server, "dllm");
    res.set(http::field::content_type, std::string(content_type));
    for (const auto& [name, value] : headers) res.set(name, value);
    res.keep_alive(keep_alive_ && !server_.stopping.load());
    keep_alive_ = res.keep_alive();
    res.body() = std::move(body);
    res.prepare_payload();
    return Wrote(Await([&](auto done) { http::async_write(stream_, res, std::move(done)); },
                       WriteDeadline()));
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
    return Wrote(Await(
        [&](auto done) { http::async_write_header(stream_, *events_serializer_, std::move(done)); },
        WriteDeadline()));
  }

  bool SendEvents(absl::string_view text) override {
    if (broken_ || text.empty()) return !broken_;
    const net::const_buffer bytes(text.data(), text.size());
    if (!chunked_) {
      return Wrote(Await([&](auto done) { net::async_write(stream_, bytes, std::move(done)); },
                         WriteDeadline()));
    }
    return Wrote(Await(
        [&](auto done) { net::async_write(stream_, http::make_chunk(bytes), std::move(done)); },
        WriteDeadline()));
  }

  void EndEvents() override {
    if (!broken_ && chunked_) {
      Wrote(Await(
          [&](auto done) { net::async_write(stream_, http::make_chunk_last(), std::move(done)); },
          WriteDeadline()));
    }
    if (!chunked_) keep_alive_ = false;
    events_serializer_.reset();
    events_head_.reset();
  }

  bool ClientGone() override {
    return broken_ || (PollFd(fd_, POLLRDHUP, 0) & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

 private:
  // Runs one asynchronous operation to its end on this connection's own
  // context, cancelled (beast::error::timeout) at `deadline`.
  template <class Start>
  beast::error_code Await(Start&& start, Clock::time_point deadline) {
    beast::get_lowest_layer(stream_).expires_at(deadline);
    std::optional<beast::error_code> result;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    context_.restart();
    while (!result && context_.run_one() > 0) {
    }
    beast::get_lowest_layer(stream_).expires_never();
    return result.value_or(net::error::operation_aborted);
  }

  Clock::time_point WriteDeadline() const {
    return Clock::now() + std::chrono::seconds(server_.options.write_timeout_seconds);
  }

  bool Wrote(const beast::error_code& ec) {
    if (ec) broken_ = true;
    return !ec;
  }

  // Waits for the first byte of the next request, looking at the stop flag
  // every slice; false on timeout, stop or a closed connection.
  bool WaitForRequest(int timeout_seconds) {
    const Clock::time_point end = Clock::now() + std::chrono::seconds(timeout_seconds);
    while (!server_.stopping.load() && Clock::now() < end) {
      const short r = PollFd(fd_, POLLIN | POLLRDHUP, kPollSliceMs);
      if (r & (POLLHUP | POLLERR)) return false;
      if (r & POLLIN) return true;  // data, or the end of the stream (read sees it)
    }
    return false;
  }

  // An error the server answers itself; the connection then closes.
  void Refuse(int status, const char* message, const char* code) {
    keep_alive_ = false;
    server_.handler->OnTransportResponse(status);
    Send(status, "application/json", TransportErrorBody(message, code), {});
  }

  // The answer to a request that could not be read; false (the connection
  // closes).
  bool RefuseRead(const beast::error_code& ec) {
    if (ec == beast::error::timeout) {
      Refuse(408, "the request was not received in time", "request_timeout");
    } else if (ec == http::error::header_limit) {
      Refuse(431, "the request head is too large", "headers_too_large");
    } else if (ec == http::error::body_limit) {
      Refuse(413, "the request body exceeds the server's limit", "request_too_large");
    } else {
      Refuse(400, "malformed HTTP request", "bad_request");
    }
    return false;
  }

  // Reads one request, head and body under one deadline. False when the
  // connection is to close (an error response, if any, was sent).
  bool ReadRequest(HttpRequest* out) {
    const HttpOptions& o = server_.options;
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(o.header_timeout_seconds);
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimitBytes);
    parser.body_limit(o.max_body_bytes);
    beast::error_code ec = Await(
        [&](auto done) { http::async_read_header(stream_, buffer_, parser, std::move(done)); },
        deadline);
    if (ec == http::error::end_of_stream || ec == net::error::eof) return false;
    if (ec) return RefuseRead(ec);
    const auto& head = parser.get();
    version_ = head.version();
    keep_alive_ = head.keep_alive();
    if (const auto length = parser.content_length(); length && *length > o.max_body_bytes) {
      return RefuseRead(http::error::body_limit);
    }
    if (!parser.is_done()) {
      if (beast::iequals(head[http::field::expect], "100-continue")) {
        static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (!Wrote(Await(
                [&](auto done) {
                  net::async_write(stream_, net::buffer(kContinue, sizeof(kContinue) - 1),
                                   std::move(done));
                },
                WriteDeadline()))) {
          return false;
        }
      }
      ec = Await([&](auto done) { http::async_read(stream_, buffer_, parser, std::move(done)); },
                 deadline);
      if (ec) return RefuseRead(ec);
    }
    http::request<http::string_body> request = parser.release();
    out->method = std::string(request.method_string());
    const std::string target(request.target());
    out->path = target.substr(0, target.find('?'));
    out->authorization = std::string(request[http::field::authorization]);
    out->body = std::move(request.body());
    out->peer = peer_;
    return true;
  }

  void Shutdown() {
    if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
      if (!broken_) {
        Await([&](auto done) { stream_.async_shutdown(std::move(done)); },
              Clock::now() + std::chrono::seconds(2));
      }
    }
    beast::error_code ec;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(stream_).socket().close(ec);
  }

  HttpServer::Impl& server_;
  net::io_context& context_;
  Stream& stream_;
  const int fd_;
  const std::string peer_;
  beast::flat_buffer buffer_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool broken_ = false;
  bool chunked_ = true;
  std::optional<http::response<http::empty_body>> events_head_;
  std::optional<http::response_serializer<http::empty_body>> events_serializer_;
};

}  // namespace

void HttpServer::Impl::AcceptLoop() {
  const int listen_fd = acceptor.native_handle();
  while (!stopping.load()) {
    if ((PollFd(listen_fd, POLLIN, kPollSliceMs) & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: let connections end before accepting more.
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      if (connections >= options.max_connections) {
        Refuse(fd);
        continue;
      }
      ++connections;
    }
    std::thread([self = shared_from_this(), fd] {
      self->RunConnection(fd);
      std::lock_guard<std::mutex> lock(self->mu);
      --self->connections;
      self->cv.notify_all();
    }).detach();
  }
}

// Over the connection limit: a 503 written without waiting, then closed.
// The request is read first for a moment (at most 50 ms, in this accept
// thread): closing a socket with unread bytes sends a reset, which can make
// the client lose the 503 it was sent.
void HttpServer::Impl::Refuse(int fd) {
  const std::string body = TransportErrorBody("too many connections", "too_many_connections");
  const std::string response = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nServer: dllm\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: ",
      body.size(), "\r\n\r\n", body);
  [[maybe_unused]] const ssize_t sent =
      ::send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  char drain[4096];
  for (int waited_ms = 0; waited_ms < 50 && (PollFd(fd, POLLIN, 10) & POLLIN) != 0;) {
    const ssize_t n = ::recv(fd, drain, sizeof(drain), MSG_DONTWAIT);
    if (n <= 0) break;  // the client's end of the stream, or an error
    waited_ms += 10;
  }
  ::close(fd);
  handler->OnTransportResponse(503);
}

void HttpServer::Impl::RunConnection(int fd) {
  try {
    net::io_context context;
    tcp::socket socket(context);
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
    beast::error_code ec;
    socket.assign(local.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
    if (ec) {
      ::close(fd);
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    const std::string peer = ec ? "unknown" : absl::StrCat(remote.address().to_string(), ":", remote.port());
    if (tls != nullptr) {
      beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), *tls);
      Connection<beast::ssl_stream<beast::tcp_stream>>(*this, context, stream, fd, peer).Serve();
    } else {
      beast::tcp_stream stream(std::move(socket));
      Connection<beast::tcp_stream>(*this, context, stream, fd, peer).Serve();
    }
  } catch (const std::exception& e) {
    // A connection's failure ends that connection only.
    std::fprintf(stderr, "dllm-server: http connection ended: %s\n", e.what());
  }
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpOptions& options,
                                                              HttpHandler* handler) {
  auto impl = std::make_shared<Impl>();
  impl->options = options;
  impl->handler = handler;
  const size_t colon = options.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen: '", options.listen, "' is not HOST:PORT"));
  }
  std::string host = options.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen: '", host, "' is not an IP address"));
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("--http-listen: cannot listen on ", options.listen, ": ", ec.message()));
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
      return absl::InvalidArgumentError(absl::StrCat("--tls-cert: cannot use ",
                                                     options.tls_cert_file, ": ", ec.message()));
    }
    impl->tls->use_private_key_file(options.tls_key_file, ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat("--tls-key: cannot use ",
                                                     options.tls_key_file, ": ", ec.message()));
    }
  }
  impl->accept_thread = std::thread([raw = impl.get()] { raw->AcceptLoop(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }
bool HttpServer::tls() const { return impl_->tls != nullptr; }

void HttpServer::Stop(int grace_seconds) {
  impl_->stopping = true;
  if (impl_->accept_thread.joinable()) impl_->accept_thread.join();
  beast::error_code ec;
  impl_->acceptor.close(ec);
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (!impl_->cv.wait_for(lock, std::chrono::seconds(grace_seconds),
                          [this] { return impl_->connections == 0; })) {
    std::fprintf(stderr, "dllm-server: %d HTTP connections still open at shutdown\n",
                 impl_->connections);
  }
}

}  // namespace dllm
