// The OpenAI request bodies of POST /v1/completions and /v1/chat/completions,
// checked field by field and turned into the engine's GenerationRequest, so
// that every front end shares one validation (request_validation.h) and one
// engine path. The diffusion settings come as extra body fields, as
// vLLM and diffuse-rs take them: steps, block_length, algorithm, threshold,
// alg_temp, cfg_scale, eps, top_k and dllm_canvas.
//
// Errors are Status values whose message starts with the body field they
// are about ("max_tokens: must be an integer"); api_error.h turns them into
// OpenAI's error body with that field as `param`. An unknown field is an
// error, as it is for OpenAI, so a typo is not silently ignored.
#ifndef DLLM_SERVICE_HTTP_OPENAI_REQUEST_H_
#define DLLM_SERVICE_HTTP_OPENAI_REQUEST_H_

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/model/model.h"
#include "service/engine/generation_request.h"
#include "service/json/json.h"

namespace dllm {

// kInfill: llama-server's /infill (infill_request.h), which shares the error
// mapping.
enum class OpenAiEndpoint { kCompletions, kChatCompletions, kInfill };

// The most stop strings a request may give (OpenAI's limit).
inline constexpr int kMaxStopStrings = 4;

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  // Prompt (text, or ids after the chat template), diffusion, sampling and
  // stream options; `model` is left empty (checked here already).
  GenerationRequest generate;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;  // 0..kMaxTopCandidates
  bool canvas = false;   // dllm_canvas: `event: canvas` SSE events
  std::vector<std::string> stop;
  std::string user;
};

// `body` is the parsed JSON. `model_path` is the served file, for `model`:
// a model this server does not serve is NOT_FOUND. Chat messages are
// rendered by the model's chat template and encoded here.
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, const Json& body,
                                                 const Model& model, absl::string_view model_path);

// A field taken only at its neutral value (OpenAI's penalties, llama-server's
// token samplers): `listed` says whether `key` is one of `fields`; when it
// is, a value other than null or the neutral number is INVALID_ARGUMENT
// naming it ("only 0 is supported" + `why`).
struct NeutralField {
  const char* name;
  double neutral;
};
absl::Status CheckNeutral(std::span<const NeutralField> fields, const std::string& key,
                          const Json& value, absl::string_view why, bool* listed);

// Typed readers of a body field, shared by the endpoints: each names the
// field when the value has the wrong type or range, and leaves `out` alone
// when the field is absent or null.
absl::Status ReadBool(const Json& body, const char* field, bool* out);
absl::Status ReadNumber(const Json& body, const char* field, double lo, double hi,
                        std::optional<double>* out);
absl::Status ReadInteger(const Json& body, const char* field, int64_t lo, int64_t hi,
                         std::optional<int64_t>* out);
absl::Status ReadString(const Json& body, const char* field, std::string* out);
// `stop`: a string or an array of at most `max_strings` non-empty strings.
absl::Status ReadStop(const Json& body, size_t max_strings, std::vector<std::string>* stop);
// The diffusion extras (steps, block_length, algorithm, threshold, cache,
// cache_refresh, eps, cfg_scale) and the sampling fields (temperature,
// top_p, alg_temp, top_k, seed) into `generate`.
absl::Status ReadGenerationSettings(const Json& body, GenerationRequest* generate);

// The id GET /v1/models reports and responses carry: the GGUF general.name,
// or the file name without its directory and ".gguf".
std::string ServedModelId(const Model& model, absl::string_view model_path);

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_OPENAI_REQUEST_H_
