// The gRPC front end's requests as the engine takes them: a GenerateRequest
// or a Step session's Open turned into a GenerationRequest, with the checks
// only the wire format needs (an enum value the proto does not define is
// "diffusion.algorithm: unknown value 99"); then the engine's validation
// (request_validation.h) turns it into a GenerationSpec.
#ifndef DLLM_SERVICE_GRPC_PROTO_REQUEST_H_
#define DLLM_SERVICE_GRPC_PROTO_REQUEST_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/model/model.h"
#include "service/engine/generation_request.h"
#include "service/engine/request_validation.h"

namespace dllm {

absl::StatusOr<GenerationRequest> GenerationRequestFromProto(const v1::GenerateRequest& request);
// An Open's request (its stream settings stay at their defaults).
absl::StatusOr<GenerationRequest> GenerationRequestFromOpen(const v1::Open& open);

// The two steps at once: the wire's checks, then the engine's.
absl::StatusOr<GenerationSpec> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                       const Model& model,
                                                       absl::string_view model_path);
absl::StatusOr<GenerationSpec> ValidateOpen(const v1::Open& open, const Model& model,
                                            absl::string_view model_path);
// The masked samplers' settings of a request's DiffusionParams and
// SamplingParams (SamplerConfigFromRequest).
absl::StatusOr<SamplerConfig> SamplerConfigFromProto(const v1::DiffusionParams& diffusion,
                                                     const v1::SamplingParams& sampling,
                                                     const ModelConfig& config);

}  // namespace dllm

#endif  // DLLM_SERVICE_GRPC_PROTO_REQUEST_H_
