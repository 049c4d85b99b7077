// The OpenAI response shapes of one completion: the whole response
// (`text_completion` / `chat.completion`), the streamed chunks
// (`text_completion` / `chat.completion.chunk`), usage and logprobs. Plain
// builders of JSON values; what goes into them is completions_endpoint.cc's.
#ifndef DLLM_SERVICE_HTTP_OPENAI_RESPONSE_H_
#define DLLM_SERVICE_HTTP_OPENAI_RESPONSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "dllm/v1/dllm.pb.h"
#include "service/http/openai_request.h"
#include "service/json/json.h"

namespace dllm {

// One generated token for `logprobs`.
struct TokenLogprob {
  std::string text;                                 // the token's bytes
  double logprob = 0;                               // NaN (written as null) when unknown
  std::vector<std::pair<std::string, double>> top;  // alternatives, most probable first
};

// What every response and chunk of one completion shares.
struct CompletionHeader {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string id;  // "cmpl-..." / "chatcmpl-..."
  std::string model;
  int64_t created = 0;  // Unix seconds
};

Json UsageJson(const v1::Usage& usage);
// `logprobs` of one choice, in the endpoint's shape.
Json LogprobsJson(OpenAiEndpoint endpoint, const std::vector<TokenLogprob>& tokens);

// A streamed chunk with a text delta; `first` (chat) adds the assistant role.
Json DeltaChunk(const CompletionHeader& h, absl::string_view text, bool first);
// The last choice chunk: no text, the finish reason and the logprobs
// (null when not asked for).
Json FinishChunk(const CompletionHeader& h, absl::string_view finish_reason, Json logprobs);
// stream_options.include_usage: the chunk after the last, with no choices.
Json UsageChunk(const CompletionHeader& h, const v1::Usage& usage);
// The whole response of a request without `stream`.
Json WholeResponse(const CompletionHeader& h, absl::string_view text,
                   absl::string_view finish_reason, Json logprobs, const v1::Usage& usage);

// dllm's own facts about the run (seed, steps, timings), under "dllm" in
// the whole response and the finish chunk; OpenAI clients ignore it.
Json DllmExtras(const v1::Final& final, absl::string_view request_id);

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_OPENAI_RESPONSE_H_
