#include "service/engine/admission.h"

#include <map>
#include <utility>

#include "kernels/ggml_types.h"
#include "service/engine/request_validation.h"

namespace dllm {

std::string WeightFormat(const Model& model) {
  // Norms and biases are F32 in every file: only 2-D weights count.
  std::map<std::string, uint64_t> bytes_by_type;
  for (const GgufTensor& t : model.file().tensors()) {
    if (t.n_dims >= 2) bytes_by_type[GgmlTypeName(t.type)] += t.n_bytes;
  }
  std::string format;
  uint64_t best = 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > best) best = bytes, format = type;
  }
  return format;
}

Admission::Admission(std::shared_ptr<const Model> model, std::string model_path,
                     EngineWorker* worker, ServiceMetrics* metrics)
    : model_(std::move(model)),
      model_path_(std::move(model_path)),
      worker_(worker),
      metrics_(ServiceMetrics::OrNoOp(metrics)) {}

absl::StatusOr<AdmittedGeneration> Admission::AdmitGeneration(const GenerationRequest& request,
                                                              EventSink* sink,
                                                              EngineClock::time_point deadline,
                                                              RpcKind rpc) {
  if (absl::Status s = CheckAvailableCounted(rpc); !s.ok()) return s;
  absl::StatusOr<GenerationSpec> spec = ValidateGenerateRequest(request, *model_, model_path_);
  if (!spec.ok()) {
    metrics_->OnRejected(rpc, RejectReason::kInvalid, spec.status().code());
    return spec.status();
  }
  const EngineWorker::Reservation reservation = ReservationFor(model_->config(), *spec);
  AdmittedGeneration out;
  out.mailbox = std::make_shared<GenerateMailbox>(spec->request_id, spec->stream.heartbeat_seconds,
                                                  sink, metrics_, rpc);
  out.job = std::make_shared<GenerateJob>(model_, std::move(*spec), out.mailbox, metrics_);
  out.job->set_rpc(rpc);
  out.job->set_deadline(deadline);
  // Registered before Submit: the engine may finish the job (and the call)
  // before Submit returns.
  CallStarted();
  if (absl::Status admitted = worker_->Submit(out.job, reservation); !admitted.ok()) {
    out.mailbox->Detach();
    CallEnded();
    return admitted;
  }
  watchdog_.Watch(out.mailbox);
  return out;
}

absl::Status Admission::CheckAvailable() const {
  if (draining_) return absl::UnavailableError("server is draining");
  if (!worker_->ready()) return absl::UnavailableError("the model is still warming up");
  return absl::OkStatus();
}

absl::Status Admission::CheckAvailableCounted(RpcKind rpc) const {
  absl::Status s = CheckAvailable();
  if (!s.ok()) {
    metrics_->OnRejected(rpc, draining() ? RejectReason::kDraining : RejectReason::kNotReady,
                         absl::StatusCode::kUnavailable);
  }
  return s;
}

void Admission::StartDraining() {
  draining_ = true;
  watchdog_.StartDrain();
}

void Admission::WatchSession(const std::shared_ptr<StepOutbox>& outbox) { watchdog_.Watch(outbox); }

void Admission::CallStarted() {
  std::lock_guard<std::mutex> lock(mu_);
  ++active_streams_;
}

void Admission::CallEnded() {
  std::lock_guard<std::mutex> lock(mu_);
  --active_streams_;
  streams_cv_.notify_all();
}

int Admission::active_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_streams_;
}

bool Admission::WaitNoStreams(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return streams_cv_.wait_for(lock, timeout, [this] { return active_streams_ == 0; });
}

}  // namespace dllm
