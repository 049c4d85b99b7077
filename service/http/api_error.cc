#include "service/http/api_error.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dllm {
namespace {

// GenerateRequest field paths and the body fields they come from.
constexpr std::pair<absl::string_view, absl::string_view> kProtoToBody[] = {
    {"diffusion.gen_length", "max_tokens"},
    {"diffusion.steps", "steps"},
    {"diffusion.block_length", "block_length"},
    {"diffusion.algorithm", "algorithm"},
    {"diffusion.threshold", "threshold"},
    {"diffusion.eps", "eps"},
    {"diffusion.cache_refresh_steps", "cache_refresh"},
    {"diffusion.cache", "cache"},
    {"diffusion.cfg_scale", "cfg_scale"},
    {"diffusion.sampler", "sampler"},
    {"diffusion.entropy_bound.max_steps", "eb_max_steps"},
    {"diffusion.entropy_bound.t_min", "eb_t_min"},
    {"diffusion.entropy_bound.t_max", "eb_t_max"},
    {"diffusion.entropy_bound.entropy_bound", "eb_entropy_bound"},
    {"diffusion.entropy_bound.stability_threshold", "eb_stability_threshold"},
    {"diffusion.entropy_bound.confidence_threshold", "eb_confidence_threshold"},
    {"diffusion.llada2.steps_per_block", "steps_per_block"},
    {"diffusion.llada2.editing_threshold", "editing_threshold"},
    {"diffusion.llada2.max_post_steps", "max_post_steps"},
    {"sampling.temperature", "temperature"},
    {"sampling.top_p", "top_p"},
    {"sampling.top_k", "top_k"},
    {"sampling.alg_temp", "alg_temp"},
    {"sampling.seed", "seed"},
    {"stream.top_candidates", "top_logprobs"},
    {"stream.include_logprobs", "logprobs"},
};

bool IsFieldChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '[' ||
         c == ']';
}

// "field: why" -> "field"; empty when the message does not start with one.
std::string LeadingField(absl::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == absl::string_view::npos || colon == 0) return "";
  const absl::string_view field = message.substr(0, colon);
  for (char c : field) {
    if (!IsFieldChar(c)) return "";
  }
  return std::string(field);
}

std::string BodyParam(const std::string& field, OpenAiEndpoint endpoint) {
  for (const auto& [proto, body] : kProtoToBody) {
    if (field == proto) return std::string(body);
  }
  if (endpoint == OpenAiEndpoint::kInfill) {
    if (field == "diffusion.gen_length") return "n_predict";
    if (absl::StartsWith(field, "prompt.suffix")) return "input_suffix";
    if (absl::StartsWith(field, "prompt.")) return "input_prefix";
  }
  if (absl::StartsWith(field, "prompt.suffix")) return "suffix";
  // The prompt as the gRPC validation names it: the chat endpoint's prompt
  // is its messages.
  if (absl::StartsWith(field, "prompt.")) {
    return endpoint == OpenAiEndpoint::kChatCompletions ? "messages" : "prompt";
  }
  if (absl::StartsWith(field, "diffusion") || absl::StartsWith(field, "sampling")) return "";
  return field;
}

}  // namespace

ApiError MakeApiError(int status, std::string message, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.code = std::move(code);
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  if (status == 401) e.type = "authentication_error";
  if (status == 429) e.type = "rate_limit_error";
  return e;
}

ApiError ApiErrorFromStatus(const absl::Status& status, OpenAiEndpoint endpoint) {
  int http = 500;
  std::string code;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      http = 400;
      break;
    case absl::StatusCode::kUnimplemented:
      http = 400;
      code = "unsupported";
      break;
    case absl::StatusCode::kNotFound:
      http = 404;
      code = "model_not_found";
      break;
    case absl::StatusCode::kResourceExhausted:
      http = 429;
      code = "server_busy";
      break;
    case absl::StatusCode::kUnavailable:
      http = 503;
      code = "unavailable";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      http = 504;
      code = "timeout";
      break;
    case absl::StatusCode::kCancelled:
      http = 499;
      code = "cancelled";
      break;
    default:
      break;
  }
  ApiError e = MakeApiError(http, std::string(status.message()), std::move(code));
  if (http >= 500 || http == 429) return e;
  const std::string field = LeadingField(status.message());
  e.param = BodyParam(field, endpoint);
  // The message names the field as the body does ("diffusion.block_length:
  // ..." becomes "block_length: ...").
  if (!e.param.empty() && e.param != field) {
    e.message = absl::StrCat(e.param, status.message().substr(field.size()));
  }
  return e;
}

Json ApiErrorBody(const ApiError& error) {
  Json inner = Json::object();
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param.empty() ? Json(nullptr) : Json(error.param);
  inner["code"] = error.code.empty() ? Json(nullptr) : Json(error.code);
  Json body = Json::object();
  body["error"] = std::move(inner);
  return body;
}

}  // namespace dllm
