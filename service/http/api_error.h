// OpenAI's error responses: {"error": {"message", "type", "param", "code"}}
// with the HTTP status that goes with them. A Status from validation (ours
// or the gRPC API's, request_validation.h) names its field first; that field
// becomes `param`, in the name the HTTP body uses ("diffusion.block_length"
// -> "block_length", "diffusion.gen_length" -> "max_tokens").
#ifndef DLLM_SERVICE_HTTP_API_ERROR_H_
#define DLLM_SERVICE_HTTP_API_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "service/http/openai_request.h"
#include "service/json/json.h"

namespace dllm {

struct ApiError {
  int status = 500;
  std::string message;
  std::string type;   // "invalid_request_error", "server_error", ...
  std::string param;  // the body field, or empty
  std::string code;   // e.g. "model_not_found"; empty = null
};

// The error a non-OK `status` of a request to `endpoint` is: INVALID_ARGUMENT,
// FAILED_PRECONDITION and UNIMPLEMENTED 400, NOT_FOUND 404,
// RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, CANCELLED
// 499 (the client went away), anything else 500.
ApiError ApiErrorFromStatus(const absl::Status& status, OpenAiEndpoint endpoint);

// An error not from a Status (401, 404 for a path, 405, 413, ...).
ApiError MakeApiError(int status, std::string message, std::string code);

// The body: {"error": {...}}.
Json ApiErrorBody(const ApiError& error);

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_API_ERROR_H_
