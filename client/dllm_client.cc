// DllmClient and StepSession: gRPC calls turned into absl::Status results.
#include "client/dllm_client.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

constexpr double kDefaultUnaryTimeoutSeconds = 30;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

bool IsMine(const v1::StepResponse& response, uint64_t seq) { return response.seq() == seq; }

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// ---- StepSession ----

StepSession::~StepSession() {
  if (ended_ || !stream_) return;
  // Not closed by the caller: end the call without waiting on the server.
  context_->TryCancel();
  stream_->Finish().ok();
}

void StepSession::Track(const v1::StepResponse& response) {
  switch (response.result_case()) {
    case v1::StepResponse::kStep:
      step_ = response.step().step();
      break;
    case v1::StepResponse::kFinal:
      finished_ = true;
      break;
    case v1::StepResponse::kRewound:
      step_ = response.rewound().step();
      finished_ = false;
      break;
    default:
      break;
  }
  if (observer_) observer_(response);
}

absl::Status StepSession::Finish() {
  ended_ = true;
  stream_->WritesDone();
  return FromGrpcStatus(stream_->Finish());
}

absl::StatusOr<std::vector<v1::StepResponse>> StepSession::Run(
    v1::StepRequest request, const std::function<bool(const v1::StepResponse&)>& done) {
  if (ended_) return absl::FailedPreconditionError("step session: the stream has ended");
  const uint64_t seq = next_seq_++;
  request.set_seq(seq);
  if (!stream_->Write(request)) {
    // The server ended the call; its status says why.
    absl::Status status = Finish();
    if (status.ok()) status = absl::UnavailableError("step session: the server ended the stream");
    return status;
  }
  std::vector<v1::StepResponse> responses;
  v1::StepResponse response;
  while (stream_->Read(&response)) {
    Track(response);
    if (IsMine(response, seq) && response.has_error()) {
      return absl::Status(static_cast<absl::StatusCode>(response.error().code()),
                          response.error().message());
    }
    responses.push_back(response);
    if (IsMine(response, seq) && done(response)) return responses;
  }
  absl::Status status = Finish();
  if (status.ok()) {
    status = absl::UnavailableError(
        absl::StrCat("step session: the stream ended before the answer to seq ", seq));
  }
  return status;
}

absl::StatusOr<std::vector<v1::StepResponse>> StepSession::Advance(const v1::Advance& advance) {
  v1::StepRequest request;
  *request.mutable_advance() = advance;
  const uint32_t wanted = advance.steps() == 0 ? 1 : advance.steps();
  uint32_t seen = 0;
  return Run(std::move(request), [&](const v1::StepResponse& r) {
    if (r.has_final()) return true;
    if (!r.has_step()) return false;
    ++seen;
    // A step that ends the session (canvas complete or early exit) is
    // followed by the Final: wait for it.
    return seen >= wanted && !r.step().final_follows();
  });
}

absl::StatusOr<v1::ForwardResult> StepSession::Forward(const v1::Forward& forward) {
  v1::StepRequest request;
  *request.mutable_forward() = forward;
  auto responses =
      Run(std::move(request), [](const v1::StepResponse& r) { return r.has_forward(); });
  if (!responses.ok()) return responses.status();
  return responses->back().forward();
}

absl::StatusOr<std::vector<v1::StepResponse>> StepSession::Commit(const v1::Commit& commit) {
  v1::StepRequest request;
  *request.mutable_commit() = commit;
  // Like Advance: a commit that ends the session is followed by Final.
  return Run(std::move(request), [](const v1::StepResponse& r) {
    return r.has_final() || (r.has_step() && !r.step().final_follows());
  });
}

absl::StatusOr<v1::Rewound> StepSession::Rewind(uint32_t to_step) {
  v1::StepRequest request;
  request.mutable_rewind()->set_to_step(to_step);
  auto responses =
      Run(std::move(request), [](const v1::StepResponse& r) { return r.has_rewound(); });
  if (!responses.ok()) return responses.status();
  return responses->back().rewound();
}

absl::Status StepSession::Close() {
  v1::StepRequest request;
  request.mutable_close();
  auto responses =
      Run(std::move(request), [](const v1::StepResponse& r) { return r.has_closed(); });
  if (!responses.ok()) return responses.status();
  return Finish();
}

// ---- DllmClient ----

DllmClient::DllmClient(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options)
    : options_(options),
      channel_(std::move(channel)),
      stub_(v1::DiffusionLM::NewStub(channel_)),
      health_stub_(grpc::health::v1::Health::NewStub(channel_)) {}

DllmClient::DllmClient(const std::string& target)
    : DllmClient(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()), ClientOptions()) {
  options_.target = target;
}

absl::StatusOr<std::unique_ptr<DllmClient>> DllmClient::Create(const ClientOptions& options) {
  if (options.target.empty()) return absl::InvalidArgumentError("target: empty");
  if (options.timeout_seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout_seconds: ", options.timeout_seconds, " is negative"));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  if (!options.tls_ca_file.empty()) {
    auto ca = ReadFile(options.tls_ca_file);
    if (!ca.ok())
      return absl::Status(ca.status().code(), absl::StrCat("tls_ca_file: ", ca.status().message()));
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = *std::move(ca);
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  auto channel = grpc::CreateCustomChannel(options.target, credentials, args);
  return std::unique_ptr<DllmClient>(new DllmClient(std::move(channel), options));
}

void DllmClient::SetDeadline(grpc::ClientContext* context, bool unary) const {
  double seconds = options_.timeout_seconds;
  if (seconds <= 0 && unary) seconds = kDefaultUnaryTimeoutSeconds;
  if (seconds <= 0) return;
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
}

absl::StatusOr<v1::ModelInfo> DllmClient::GetModelInfo() {
  grpc::ClientContext context;
  SetDeadline(&context, /*unary=*/true);
  v1::ModelInfo info;
  const grpc::Status status = stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

absl::StatusOr<v1::ServerInfo> DllmClient::GetServerInfo() {
  grpc::ClientContext context;
  SetDeadline(&context, /*unary=*/true);
  v1::ServerInfo info;
  const grpc::Status status = stub_->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

absl::StatusOr<v1::TokenizeResponse> DllmClient::Tokenize(const v1::TokenizeRequest& request) {
  grpc::ClientContext context;
  SetDeadline(&context, /*unary=*/true);
  v1::TokenizeResponse response;
  const grpc::Status status = stub_->Tokenize(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> DllmClient::CheckHealth(
    const std::string& service) {
  grpc::ClientContext context;
  SetDeadline(&context, /*unary=*/true);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health_stub_->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.status();
}

absl::Status DllmClient::Generate(const v1::GenerateRequest& request,
                                  const std::function<bool(const v1::GenerateEvent&)>& on_event) {
  grpc::ClientContext context;
  SetDeadline(&context, /*unary=*/false);
  std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader =
      stub_->Generate(&context, request);
  v1::GenerateEvent event;
  bool cancelled = false;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      context.TryCancel();
      cancelled = true;
      break;
    }
  }
  // After a cancel, Finish still has to drain the stream.
  if (cancelled) {
    while (reader->Read(&event)) {
    }
  }
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<std::unique_ptr<StepSession>> DllmClient::OpenSession(const v1::Open& open) {
  std::unique_ptr<StepSession> session(new StepSession());
  session->context_ = std::make_unique<grpc::ClientContext>();
  SetDeadline(session->context_.get(), /*unary=*/false);
  session->stream_ = stub_->Step(session->context_.get());
  v1::StepRequest request;
  *request.mutable_open() = open;
  auto responses =
      session->Run(std::move(request), [](const v1::StepResponse& r) { return r.has_opened(); });
  if (!responses.ok()) return responses.status();
  session->opened_ = responses->back().opened();
  session->request_id_ = responses->back().request_id();
  return session;
}

}  // namespace dllm
