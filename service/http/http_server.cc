#include "service/http/http_server.h"

#include <poll.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "service/http/http_transport.h"
#include "service/http/socket_stats.h"

namespace dllm {

ConnectionBase::~ConnectionBase() { server_->Release(*this); }

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

short PollNow(int fd, short events) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, 0) > 0 ? p.revents : 0;
}

double ArrivalRate(int fd, Clock::time_point since, int64_t bytes_before, Clock::time_point now) {
  const int64_t bytes = TcpBytesReceived(fd);
  const double seconds = std::chrono::duration<double>(now - since).count();
  if (bytes < 0 || bytes_before < 0 || seconds <= 0) return -1;
  return static_cast<double>(bytes - bytes_before) / seconds;
}

std::shared_ptr<ConnectionBase> HttpServer::Impl::TakeOldestIdle(const std::string& peer) {
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

std::shared_ptr<ConnectionBase> HttpServer::Impl::TakeSlowestReading(const std::string& peer) {
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
    MakeConnection(shared_from_this(), std::move(socket), prefix, peer)->Start();
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