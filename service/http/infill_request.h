// llama-server's POST /infill, as the editor plugins llama.vim and
// llama.vscode send it, turned into the engine's GenerationRequest (prompt
// and suffix as token ids), so that infill runs the one engine path of
// prompt.suffix.
//
// The canvas: [input_extra context][BOS when the vocabulary adds one]
// input_prefix + prompt, n_predict masks (the span), input_suffix. No FIM
// tokens: a diffusion model sees both sides of the span on its own. What
// does not fit the context is trimmed as llama-server trims: the prefix
// loses its start (it keeps at least three quarters of the room when the
// suffix needs the rest), the suffix its end, and the extra context its
// oldest tokens; the response says so (`truncated`, and dllm.trimmed).
//
// Fields llama-server reads and what they become here are listed in the
// README ("/infill"); cache_prompt selects the dual cache, and a span
// without block_length is decoded in small blocks from the left
// (InfillBlockLength). Fields whose effect dllm does not reproduce but that
// cannot change the text (id_slot, t_max_prompt_ms, samplers, model in a
// single-model server) and fields llama-server ignores
// are accepted and named in `ignored`, for a warning in the log; the token
// samplers dllm has no counterpart for (min_p, repeat_penalty, ...) are
// refused unless at their neutral value, as /v1/completions refuses them.
#ifndef DLLM_SERVICE_HTTP_INFILL_REQUEST_H_
#define DLLM_SERVICE_HTTP_INFILL_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/model/model.h"
#include "service/engine/generation_request.h"
#include "service/json/json.h"

namespace dllm {

// Most completions one request may ask for (n_cmpl; llama-server's default
// number of slots).
inline constexpr int kMaxInfillCompletions = 4;
// Most stop strings (llama-server has no limit; the plugins send none).
inline constexpr int kMaxInfillStopStrings = 16;

// Tokens dropped to fit the context, per part, and the bytes of text cut
// before tokenizing (more than the trim could keep in any case).
struct InfillTrim {
  int prefix = 0;
  int suffix = 0;
  int extra = 0;
  int64_t prefix_bytes = 0;
  int64_t suffix_bytes = 0;
  int64_t extra_bytes = 0;
  bool any() const {
    return prefix + suffix + extra > 0 || prefix_bytes + suffix_bytes + extra_bytes > 0;
  }
};

struct InfillRequest {
  // Prompt (token ids) and suffix (token ids), the span as gen_length, and
  // the diffusion and sampling settings.
  GenerationRequest generate;
  bool warm_up = false;  // n_predict 0: nothing to generate
  int n_predict = 0;     // the span (0 for a warm-up)
  bool stream = false;
  int n_cmpl = 1;
  int n_indent = 0;
  int t_max_predict_ms = 0;  // <= 0: no limit
  int id_slot = -1;
  std::vector<std::string> stop;
  // response_fields: only these paths ("timings/prompt_n"), as flat keys;
  // empty: the whole object.
  std::vector<std::string> response_fields;
  bool select_fields = false;
  InfillTrim trimmed;
  std::vector<std::string> ignored;   // fields accepted without effect
  std::vector<std::string> samplers;  // as sent (reported back in generation_settings)
};

// `body` is the parsed JSON. Errors name the body field ("input_extra[2].text:
// must be a string"); a request that cannot fit the context is
// OUT_OF_RANGE (llama-server's exceed_context_size_error).
absl::StatusOr<InfillRequest> ParseInfillRequest(const Json& body, const Model& model);

// The flat object of response_fields: each path ("timings/prompt_n") that
// names a value of `whole`, under the path itself, in the order asked.
Json SelectResponseFields(const Json& whole, const std::vector<std::string>& paths);

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_INFILL_REQUEST_H_
