// POST /v1/completions and /v1/chat/completions: OpenAI's completions on
// the serving engine. Whole responses, or server-sent events with the
// stable-text deltas the gRPC stream computes (and `event: canvas` for
// dllm_canvas); stop strings and logprobs as OpenAI has them. Admission,
// the engine thread, cancellation, draining and metrics are the gRPC
// API's; a client that disconnects cancels its request within one layer.
#ifndef DLLM_SERVICE_HTTP_COMPLETIONS_ENDPOINT_H_
#define DLLM_SERVICE_HTTP_COMPLETIONS_ENDPOINT_H_

#include <string>

#include "service/engine/admission.h"
#include "service/http/http_server.h"
#include "service/http/openai_request.h"

namespace dllm {

// Thread-safe.
class CompletionsEndpoint {
 public:
  // `admission` (non-owning) outlives the endpoint. `model_id` is what
  // responses name the model; a stream with nothing to send carries a
  // `: ping` comment at least every `heartbeat_seconds`.
  CompletionsEndpoint(Admission* admission, std::string model_id, int heartbeat_seconds);

  // `endpoint` is kCompletions or kChatCompletions.
  void Handle(OpenAiEndpoint endpoint, const HttpRequest& request, HttpResponder& out);

 private:
  Admission* const admission_;
  const std::string model_id_;
  const int heartbeat_seconds_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_COMPLETIONS_ENDPOINT_H_
