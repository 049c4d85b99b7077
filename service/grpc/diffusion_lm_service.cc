#include "service/grpc/diffusion_lm_service.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/base/utf8.h"
#include "engine/base/version.h"
#include "engine/tokenizer/chat_template.h"
#include "service/engine/request_validation.h"
#include "service/grpc/grpc_status.h"
#include "service/grpc/proto_request.h"
#include "service/grpc/request_decoder.h"
#include "service/grpc/step_reactor.h"

namespace dllm {
namespace {

// The longest text Tokenize takes: its reply (each token an id of up to 5
// bytes and its piece with 2 bytes of framing, the pieces adding up to the
// text) stays under 8 x 512 KiB = the 4 MiB message limit.
constexpr size_t kMaxTokenizeTextBytes = 512 << 10;

// How long a refused client should wait before trying again, in the
// trailing metadata of RESOURCE_EXHAUSTED (serving.md 1.7).
constexpr const char* kRetryAfterMs = "1000";

// The client's deadline on the engine's clock; max() when it has none.
EngineClock::time_point EngineDeadline(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  const auto now = std::chrono::system_clock::now();
  if (deadline >= now + std::chrono::hours(24 * 365)) return EngineClock::time_point::max();
  return EngineClock::now() + std::chrono::duration_cast<EngineClock::duration>(deadline - now);
}

// The client's address without its port ("ipv4:10.0.0.7:53412" ->
// "ipv4:10.0.0.7"), so a client is one client across its connections.
std::string PeerHost(const std::string& peer) {
  if (!absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:")) return peer;
  const size_t colon = peer.rfind(':');
  return colon > 5 ? peer.substr(0, colon) : peer;
}

}  // namespace

// One Generate call: validates and admits in its constructor, then relays
// the mailbox's writes. Deletes itself in OnDone.
class DiffusionLmService::GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                                  public EventSink {
 public:
  GenerateReactor(DiffusionLmService* service, grpc::CallbackServerContext* context,
                  const grpc::ByteBuffer& bytes)
      : service_(service), context_(context) {
    v1::GenerateRequest request;
    absl::Status status = DecodeRequest(bytes, &request);
    if (!status.ok()) {
      service_->OnMalformed(*context_, RpcKind::kGenerate, "Generate", status);
    } else {
      status = Admit(request);
    }
    if (!status.ok()) {
      if (status.code() == absl::StatusCode::kResourceExhausted) {
        context_->AddTrailingMetadata("retry-after-ms", kRetryAfterMs);
      }
      Finish(ToGrpcStatus(status));
    }
  }

  // One write in flight (the mailbox's contract), so one buffer does.
  void Write(const v1::GenerateEvent* event) override {
    buffer_ = EncodeMessage(*event);
    StartWrite(&buffer_);
  }
  void Close(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }

  void OnWriteDone(bool ok) override {
    // A failed write means the call is over; gRPC may then skip OnCancel, so
    // stop the engine's work now. A passed deadline also fails the write,
    // often before OnCancel: the reason is the same as OnCancel's, so the
    // metrics tell deadlines from cancels.
    if (!ok && job_ != nullptr) job_->Cancel(WhyCancelled(*context_, arrived_));
    if (mailbox_ != nullptr) mailbox_->OnWriteDone(ok);
  }
  void OnCancel() override {
    if (job_ != nullptr) job_->Cancel(WhyCancelled(*context_, arrived_));
  }
  void OnDone() override {
    // Idempotent; a no-op when the job already ended.
    if (job_ != nullptr) job_->Cancel();
    if (mailbox_ != nullptr) {
      mailbox_->Detach();
      service_->admission().CallEnded();
    }
    delete this;
  }

 private:
  absl::Status Admit(const v1::GenerateRequest& request) {
    Admission& admission = service_->admission();
    // A request the wire format already refuses (an unknown enum value)
    // counts as invalid, as the engine's own refusals do.
    absl::StatusOr<GenerationRequest> engine_request = GenerationRequestFromProto(request);
    if (!engine_request.ok()) {
      if (absl::Status s = admission.CheckAvailableCounted(RpcKind::kGenerate); !s.ok()) return s;
      admission.metrics()->OnRejected(RpcKind::kGenerate, RejectReason::kInvalid,
                                      engine_request.status().code());
      return engine_request.status();
    }
    absl::StatusOr<AdmittedGeneration> admitted = admission.AdmitGeneration(
        *engine_request, this, EngineDeadline(*context_), RpcKind::kGenerate);
    if (!admitted.ok()) return admitted.status();
    mailbox_ = std::move(admitted->mailbox);
    job_ = std::move(admitted->job);
    return absl::OkStatus();
  }

  DiffusionLmService* service_;
  grpc::CallbackServerContext* context_;
  std::shared_ptr<GenerateMailbox> mailbox_;
  std::shared_ptr<GenerateJob> job_;
  grpc::ByteBuffer buffer_;  // the event being written
  const std::chrono::system_clock::time_point arrived_ = std::chrono::system_clock::now();
};

// A unary method on raw bytes: parse `bytes` into Request, run `fn`, and
// serialize its Response into `out`.
template <typename Request, typename Response, typename Fn>
grpc::ServerUnaryReactor* RawUnary(DiffusionLmService* service,
                                   grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* bytes, grpc::ByteBuffer* out,
                                   const char* method, Fn fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Request request;
  Response response;
  absl::Status status = DecodeRequest(*bytes, &request);
  if (!status.ok()) {
    service->OnMalformed(*context, RpcKind::kOther, method, status);
  } else {
    status = fn(request, &response);
  }
  if (status.ok()) *out = EncodeMessage(response);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

DiffusionLmService::DiffusionLmService(Admission* admission, ServerFacts facts)
    : admission_(admission), facts_(std::move(facts)) {}

DiffusionLmService::~DiffusionLmService() = default;

void DiffusionLmService::OnMalformed(const grpc::CallbackServerContext& context, RpcKind rpc,
                                     const char* method, const absl::Status& status) {
  admission_->metrics()->OnRejected(rpc, RejectReason::kMalformed,
                                    absl::StatusCode::kInvalidArgument);
  const std::string peer = PeerHost(context.peer());
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(malformed_mu_);
    auto [it, inserted] = malformed_logged_.try_emplace(peer, now);
    if (!inserted && now - it->second < std::chrono::minutes(1)) return;
    it->second = now;
    // Bounded: a client that changes ports cannot grow the table without end.
    if (malformed_logged_.size() > 4096) malformed_logged_.clear();
  }
  std::fprintf(stderr,
               "dllm-server: malformed %s request from %s: %s (more from this client are "
               "counted, not logged, for a minute)\n",
               method, PrintableText(peer).c_str(), PrintableText(status.message()).c_str());
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* DiffusionLmService::Step(
    grpc::CallbackServerContext* context) {
  return new StepReactor(this, context);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* DiffusionLmService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new GenerateReactor(this, context, *request);
}

grpc::ServerUnaryReactor* DiffusionLmService::GetModelInfo(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return RawUnary<v1::GetModelInfoRequest, v1::ModelInfo>(
      this, context, request, response, "GetModelInfo",
      [this](const v1::GetModelInfoRequest&, v1::ModelInfo* info) { return ModelInfo(info); });
}

grpc::ServerUnaryReactor* DiffusionLmService::GetServerInfo(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return RawUnary<v1::GetServerInfoRequest, v1::ServerInfo>(
      this, context, request, response, "GetServerInfo",
      [this](const v1::GetServerInfoRequest&, v1::ServerInfo* info) { return ServerInfo(info); });
}

grpc::ServerUnaryReactor* DiffusionLmService::Tokenize(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return RawUnary<v1::TokenizeRequest, v1::TokenizeResponse>(
      this, context, request, response, "Tokenize",
      [this](const v1::TokenizeRequest& r, v1::TokenizeResponse* out) {
        return TokenizeText(r, out);
      });
}

absl::Status DiffusionLmService::ModelInfo(v1::ModelInfo* info) const {
  if (admission_->draining()) return absl::UnavailableError("server is draining");
  const Model& model = admission_->model();
  const ModelConfig& c = model.config();
  info->set_name(c.name);
  info->set_architecture(std::string(ArchName(c.arch)));
  info->set_vocab_size(static_cast<uint32_t>(c.n_vocab));
  info->set_mask_token_id(c.tokens.mask);
  for (int32_t id : c.tokens.StopIds()) info->add_eos_token_ids(id);
  info->set_max_context(static_cast<uint32_t>(c.n_ctx_train));
  uint64_t weight_bytes = 0;
  for (const GgufTensor& t : model.file().tensors()) weight_bytes += t.n_bytes;
  info->set_weight_format(WeightFormat(model));
  info->set_file_bytes(model.file().file_size());
  info->set_weight_bytes(weight_bytes);
  info->set_n_layer(static_cast<uint32_t>(c.n_layer));
  info->set_n_embd(static_cast<uint32_t>(c.n_embd));
  info->set_chat_template(model.chat_template().name);
  *info->mutable_default_diffusion() = DefaultDiffusionParams(model);
  *info->mutable_default_sampling() = DefaultSamplingParams(model);
  return absl::OkStatus();
}

absl::Status DiffusionLmService::ServerInfo(v1::ServerInfo* info) const {
  const EngineWorker& worker = *admission_->worker();
  const EngineLoad load = worker.load();
  const EngineOptions& o = worker.options();
  info->set_version(kVersion);
  info->set_isa(facts_.isa);
  info->set_cpu(facts_.cpu);
  info->set_engine_threads(worker.threads());
  info->set_performance_cores(facts_.performance_cores);
  info->set_efficiency_cores(facts_.efficiency_cores);
  info->set_cpu_policy(facts_.cpu_policy);
  info->set_requests_running(load.running);
  info->set_requests_waiting(load.waiting);
  info->set_max_running(o.max_running);
  info->set_max_waiting(o.max_queue);
  info->set_sessions_open(load.sessions_open);
  info->set_max_sessions(o.max_sessions);
  info->set_max_batch_requests(static_cast<uint32_t>(o.max_batch_requests));
  info->set_max_batch_rows(static_cast<uint32_t>(o.max_batch_rows));
  info->set_uptime_seconds(uptime_.ElapsedSeconds());
  info->set_draining(admission_->draining());
  info->set_git_sha(kGitSha);
  return absl::OkStatus();
}

absl::Status DiffusionLmService::TokenizeText(const v1::TokenizeRequest& r,
                                              v1::TokenizeResponse* response) {
  const v1::TokenizeRequest* request = &r;
  absl::Status status;
  if (admission_->draining()) {
    status = absl::UnavailableError("server is draining");
  } else if (request->text().size() > kMaxTokenizeTextBytes) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "text: ", request->text().size(), " bytes exceed Tokenize's limit of ",
        kMaxTokenizeTextBytes, " (its reply, ids and pieces, must fit the message limit)"));
  } else if (request->no_special() && request->apply_chat_template()) {
    status = absl::InvalidArgumentError("no_special: not with apply_chat_template");
  } else {
    TextPrompt text;
    text.text = request->text();
    text.chat_template = request->chat_template();
    text.how.chat = request->apply_chat_template();
    text.how.system = request->system();
    text.how.special = !request->no_special();
    const Model& model = admission_->model();
    absl::StatusOr<std::vector<int32_t>> ids = EncodeTextPrompt(text, model, "");
    if (!ids.ok()) return ids.status();
    for (int32_t id : *ids) {
      response->add_ids(static_cast<uint32_t>(id));
      response->add_pieces(SanitizeUtf8(model.tokenizer().TokenPiece(id)));
    }
  }
  return status;
}

}  // namespace dllm
