// `DllmClient`: a thin C++ wrapper over the dllm.v1 stub (and the standard
// grpc.health.v1 one) that returns absl::Status / StatusOr, plus
// `StepSession`, a blocking helper over the bidirectional Step stream.
// Depends only on the generated proto code; errors carry the gRPC code and
// message unchanged (Abseil's codes are google.rpc.Code's).
#ifndef DLLM_CLIENT_DLLM_CLIENT_H_
#define DLLM_CLIENT_DLLM_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dllm/v1/dllm.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace dllm {

struct ClientOptions {
  std::string target = "127.0.0.1:50051";  // host:port, or any gRPC target URI
  // PEM file with the CA certificates that sign the server's certificate;
  // empty = plaintext.
  std::string tls_ca_file;
  // Overrides the name checked against the server certificate (for a
  // certificate issued to "localhost" reached as 127.0.0.1); empty = the host.
  std::string tls_server_name;
  // Deadline of every call, streams included; 0 = unary calls get 30 s,
  // streams none.
  double timeout_seconds = 0;
};

// The gRPC status as an absl::Status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

// A client-driven denoising session over one Step stream. Each operation
// sends one request and blocks until the server has answered it; the
// responses are returned (and handed to the observer, when set) in arrival
// order. An operation the server rejects (OpError) returns that error and
// leaves the session usable. One thread at a time.
class StepSession {
 public:
  ~StepSession();  // closes the session if still open, then ends the call
  StepSession(const StepSession&) = delete;
  StepSession& operator=(const StepSession&) = delete;

  const v1::Opened& opened() const { return opened_; }
  const std::string& request_id() const { return request_id_; }
  // Steps done so far, as last reported by the server.
  uint32_t step() const { return step_; }
  // True once a Final arrived (and no Rewind since).
  bool finished() const { return finished_; }

  // Runs `steps` (>= 1) sampler steps: one StepEvent each, then a Final if
  // the session ended (canvas complete, or an early exit with positions
  // still masked; the last StepEvent says so with final_follows). The Final
  // is among the returned responses.
  absl::StatusOr<std::vector<v1::StepResponse>> Advance(const v1::Advance& advance);
  // One forward pass without committing anything.
  absl::StatusOr<v1::ForwardResult> Forward(const v1::Forward& forward);
  // Commits client-chosen tokens (one history step): a StepEvent, then a
  // Final if that completed the canvas.
  absl::StatusOr<std::vector<v1::StepResponse>> Commit(const v1::Commit& commit);
  absl::StatusOr<v1::Rewound> Rewind(uint32_t to_step);
  // Closes the session and ends the call; later operations fail.
  absl::Status Close();

  // Called with every response as it is read, before the operation returns.
  void set_observer(std::function<void(const v1::StepResponse&)> observer) {
    observer_ = std::move(observer);
  }

 private:
  friend class DllmClient;
  StepSession() = default;

  // Sends `request` (with a fresh seq) and reads until `done` says the
  // operation is answered; an OpError for it ends the wait with its status.
  absl::StatusOr<std::vector<v1::StepResponse>> Run(
      v1::StepRequest request, const std::function<bool(const v1::StepResponse&)>& done);
  absl::Status Finish();  // half-closes and collects the call's status
  void Track(const v1::StepResponse& response);

  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::StepRequest, v1::StepResponse>> stream_;
  std::function<void(const v1::StepResponse&)> observer_;
  v1::Opened opened_;
  std::string request_id_;
  uint64_t next_seq_ = 1;
  uint32_t step_ = 0;
  bool finished_ = false;
  bool ended_ = false;  // the call is over (closed or failed)
};

class DllmClient {
 public:
  // Builds the channel (connects lazily); fails when the CA file cannot be read.
  static absl::StatusOr<std::unique_ptr<DllmClient>> Create(const ClientOptions& options);
  // A plaintext client for `target` with the default deadlines.
  explicit DllmClient(const std::string& target);

  absl::StatusOr<v1::ModelInfo> GetModelInfo();
  absl::StatusOr<v1::ServerInfo> GetServerInfo();
  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request);
  // grpc.health.v1.Health/Check for `service` ("" = the process,
  // "dllm.v1.DiffusionLM" = ready to generate).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> CheckHealth(
      const std::string& service);

  // Runs a generation, calling `on_event` for every event as it arrives;
  // returning false from it cancels the call (the result is then
  // CANCELLED). OK once the stream ended after its Final.
  absl::Status Generate(const v1::GenerateRequest& request,
                        const std::function<bool(const v1::GenerateEvent&)>& on_event);

  // Opens a Step session and waits for Opened (or the error).
  absl::StatusOr<std::unique_ptr<StepSession>> OpenSession(const v1::Open& open);

 private:
  DllmClient(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options);
  // Applies the configured deadline; `unary` picks the 30 s default.
  void SetDeadline(grpc::ClientContext* context, bool unary) const;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DiffusionLM::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_stub_;
};

}  // namespace dllm

#endif  // DLLM_CLIENT_DLLM_CLIENT_H_
