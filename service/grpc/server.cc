#include "service/grpc/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, ": cannot read '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", path, "' is not a PEM file"));
  }
  return ss.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const ServerOptions& o) {
  if (o.tls_cert_file.empty() && o.tls_key_file.empty()) return grpc::InsecureServerCredentials();
  if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  absl::StatusOr<std::string> cert = ReadPem(o.tls_cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(o.tls_key_file, "--tls-key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

// Why binding `listen` ("host:port") failed, for the error message: the
// bind is retried here with a plain socket, whose errno gRPC does not give.
std::string WhyCannotBind(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return "not a host:port address";
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = listen.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return "the host or port cannot be resolved";
  }
  std::string why = "the address is not usable";
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd >= 0) {
    if (bind(fd, found->ai_addr, found->ai_addrlen) != 0) {
      why = errno == EADDRINUSE ? "address already in use (is another dllm-server running?)"
                                : std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DllmServer>> DllmServer::Start(std::shared_ptr<const Model> model,
                                                              const ServerOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = Credentials(options);
  if (!creds.ok()) return creds.status();

  std::unique_ptr<DllmServer> s(new DllmServer());
  s->options_ = options;
  s->worker_ = std::make_unique<EngineWorker>(model, options.plan, options.engine, options.metrics);
  s->admission_ =
      std::make_unique<Admission>(model, options.model_path, s->worker_.get(), options.metrics);
  s->admission_->set_session_idle_seconds(options.session_idle_seconds);
  s->service_ = std::make_unique<DiffusionLmService>(s->admission_.get(), options.facts);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *creds, &s->port_);
  builder.RegisterService(s->service_.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // serving.md 1.8: keepalive 60 s / 20 s, pings allowed without calls
  // (DETAIL_FINAL_ONLY streams carry no data between heartbeats), clients
  // may ping every 10 s; idle connections close after 5 min.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10 * 1000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 5 * 60 * 1000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  // gRPC sets SO_REUSEPORT by default, so a second server on the same
  // address would start and silently take half of the new connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, ": ", WhyCannotBind(options.listen)));
  }
  s->SetReady(false);
  DllmServer* raw = s.get();
  s->worker_->Start([raw](const absl::Status& status) {
    // Readiness before WaitReady returns, so that a caller who waited sees SERVING.
    if (status.ok() && !raw->admission_->draining()) raw->SetReady(true);
    {
      std::lock_guard<std::mutex> lock(raw->mu_);
      raw->warm_done_ = true;
      raw->warm_status_ = status;
    }
    raw->cv_.notify_all();
  });
  return s;
}

DllmServer::~DllmServer() { Shutdown(); }

void DllmServer::SetReady(bool ready) {
  if (server_ == nullptr) return;
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(kReadinessService, ready);
  }
}

absl::Status DllmServer::WaitReady(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return warm_done_; })) {
    return absl::DeadlineExceededError("the engine's warm-up did not finish in time");
  }
  return warm_status_;
}

void DllmServer::Drain(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_ || draining_) return;
    draining_ = true;
  }
  // Readiness first: a probe that sees the server refuse calls must also see NOT_SERVING.
  SetReady(false);
  admission_->StartDraining();
  const auto until = std::chrono::steady_clock::now() + grace;
  bool idle = false;
  // In short slices, so that EndDrainNow() (a second SIGTERM) cuts it short.
  while (std::chrono::steady_clock::now() < until) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (end_drain_) break;
    }
    if (admission_->WaitNoStreams(std::chrono::milliseconds(50)) &&
        worker_->WaitIdle(std::chrono::milliseconds(0))) {
      idle = true;
      break;
    }
  }
  if (!idle) {
    const int left = admission_->active_streams();
    std::fprintf(stderr, "dllm-server: drain: ending %d stream(s) still running (UNAVAILABLE)\n",
                 left);
    // UNAVAILABLE, not CANCELLED: clients (and balancers) retry it elsewhere.
    worker_->CancelAll(absl::UnavailableError(
        absl::StrCat("server shutting down: the drain period of ", grace.count() / 1000,
                     " s ended before this request finished; retry on another replica")));
  }
  Shutdown();
}

void DllmServer::EndDrainNow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    end_drain_ = true;
  }
  cv_.notify_all();
}

void DllmServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  admission_->StartDraining();
  worker_->CancelAll(absl::UnavailableError("server is shutting down; retry on another replica"));
  // Cancelled streams end within a layer; give them a moment to write
  // their status before the transport goes.
  admission_->WaitNoStreams(std::chrono::seconds(5));
  // A server that never started listening (Start failed) has no transport.
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }
  worker_->Stop();
  if (server_ != nullptr) server_->Wait();
  cv_.notify_all();
}

void DllmServer::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return shut_down_; });
}

}  // namespace dllm
