// StepReactor: one Step call (a client-driven session, serving.md 2.3) on
// the callback API. It reads one op at a time, answers the ones that need no
// engine (errors before Open, Close) itself, and runs the others as
// StepOpJobs on the engine worker; StepOutbox orders its writes and reads.
// The session holds one of --max-sessions from a successful Open until the
// call ends (Close, client cancel, idle timeout, drain).
#ifndef DLLM_SERVICE_GRPC_STEP_REACTOR_H_
#define DLLM_SERVICE_GRPC_STEP_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>

#include "dllm/v1/dllm.grpc.pb.h"
#include "service/engine/admission.h"
#include "service/engine/step_op_job.h"
#include "service/engine/step_outbox.h"
#include "service/engine/step_session_state.h"

namespace dllm {

class DiffusionLmService;

// Deletes itself in OnDone.
// Reads and writes bytes (the service's raw methods): each op is parsed by
// DecodeRequest, and an op that does not parse ends the call with
// INVALID_ARGUMENT naming what could not be read.
class StepReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                          public StepSink {
 public:
  StepReactor(DiffusionLmService* service, grpc::CallbackServerContext* context);

  // StepSink. One write and one read in flight at most (StepOutbox's contract).
  void Write(const v1::StepResponse* response) override;
  void Read() override { StartRead(&read_buffer_); }
  void Close(const absl::Status& status) override;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void HandleOpen(const v1::StepRequest& request);
  void Submit(const v1::StepRequest& request);
  void CancelJob(const absl::Status& why);

  DiffusionLmService* service_;
  Admission* admission_;  // the service's
  grpc::CallbackServerContext* context_;
  const std::chrono::system_clock::time_point arrived_ = std::chrono::system_clock::now();
  const std::chrono::steady_clock::time_point started_;
  grpc::ByteBuffer read_buffer_;
  grpc::ByteBuffer write_buffer_;
  std::shared_ptr<StepOutbox> outbox_;
  std::shared_ptr<StepSessionState> state_;
  bool registered_ = false;  // counted by CallStarted
  bool rejected_ = false;    // refused at Open (already counted as a rejection)

  std::mutex mu_;
  std::shared_ptr<EngineJob> job_;  // the op in progress, for OnCancel
  absl::Status end_status_;         // what Close sent
};

}  // namespace dllm

#endif  // DLLM_SERVICE_GRPC_STEP_REACTOR_H_
