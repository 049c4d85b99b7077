// Request validation: a GenerationRequest checked field by field and turned
// into plain engine settings (a GenerationSpec), before any compute. Every
// front end's requests pass here: gRPC's Generate and Open, the HTTP
// completions and /infill, so a rule is written once. Every problem is
// INVALID_ARGUMENT naming the field by its path ("diffusion.block_length:
// 24 does not divide gen_length 128"), a `model` that is not the served
// one included. Defaults are the engine's (DefaultSamplerConfig), as
// `dllm generate` has them.
#ifndef DLLM_SERVICE_ENGINE_REQUEST_VALIDATION_H_
#define DLLM_SERVICE_ENGINE_REQUEST_VALIDATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/model/model.h"
#include "engine/sampler/entropy_bound_denoiser.h"
#include "engine/sampler/entropy_bound_sampler.h"
#include "engine/sampler/sampler_config.h"
#include "service/engine/generation_request.h"
#include "service/engine/prompt_validation.h"
#include "service/engine/settings_proto.h"

namespace dllm {

// Limits of what one request may ask for (top_candidates, heartbeats).
inline constexpr int kMaxTopCandidates = 8;
inline constexpr uint32_t kDefaultHeartbeatSeconds = 10;
inline constexpr uint32_t kMaxHeartbeatSeconds = 3600;

// GenerationRequest::Stream with defaults applied.
struct StreamSettings {
  v1::Detail detail = v1::DETAIL_TEXT;  // never DETAIL_UNSPECIFIED
  int step_stride = 1;                  // >= 1
  int top_candidates = 0;               // 0..kMaxTopCandidates
  bool include_timings = false;
  bool include_logprobs = false;
  int heartbeat_seconds = kDefaultHeartbeatSeconds;  // >= 1
};

// DiffusionGemma's entropy-bound sampler as a request runs it.
struct EntropyBoundRequest {
  EntropyBoundConfig config;  // the file's settings under the request's
  CanvasRun run;              // canvases: ceil(max_tokens / canvas_length)
  int max_tokens = 0;         // the answer's cap: gen_length, else one canvas
};

// One validated generation: everything the engine needs.
struct GenerationSpec {
  std::string request_id;  // client's, or a generated one
  // Resolved defaults, family = the model's. Under the entropy-bound
  // sampler only gen_length (the answer's cap) and seed apply.
  SamplerConfig sampler;
  // Set when the request runs the entropy-bound sampler instead of `sampler`.
  std::optional<EntropyBoundRequest> entropy_bound;
  CachingOptions caching;       // the K/V cache the request asks for (default: exact)
  std::vector<int32_t> prompt;  // token ids after tokenizer / chat template
  std::vector<int32_t> suffix;  // infill: after the generated span (prompt.suffix)
  StreamSettings stream;
  bool seed_was_set = false;  // false: sampler.seed was drawn by the server

  // Tokens on the canvas: prompt, generated span, suffix (entropy-bound:
  // the prompt and every canvas the run may take).
  int canvas_tokens() const;
  // Steps the request takes at most.
  int planned_steps() const;
};

// The masked samplers' settings of a request (diffusion and sampling); the
// entropy-bound sampler's and, on a model that is not block-diffusion,
// LLaDA2's settings are refused by name.
absl::StatusOr<SamplerConfig> SamplerConfigFromRequest(const GenerationRequest::Diffusion& d,
                                                       const GenerationRequest::Sampling& s,
                                                       const ModelConfig& config);
// Whether a request runs the entropy-bound sampler (diffusion.sampler, or
// the model's default: canvas models run it).
absl::StatusOr<bool> UsesEntropyBound(const GenerationRequest::Diffusion& d,
                                      const ModelConfig& config);
// The entropy-bound sampler's settings of a request: the file's, under
// diffusion.entropy_bound; its canvases from gen_length; the cache (exact
// unless diffusion.cache is kNone) into `caching`. The masked samplers'
// settings are refused, naming the field. The seed is the caller's.
absl::StatusOr<EntropyBoundRequest> EntropyBoundFromRequest(const GenerationRequest::Diffusion& d,
                                                            const GenerationRequest::Sampling& s,
                                                            const Model& model,
                                                            CachingOptions* caching);
// The request's cache settings (diffusion.cache, diffusion.cache_refresh_steps)
// for the masked samplers: the caches the model takes (exact for a
// block-diffusion model, its default; prefix and dual for the others, whose
// default is none), the refresh checked against `gen_length` (0: the
// default length).
absl::StatusOr<CachingOptions> CachingOptionsFromRequest(const GenerationRequest::Diffusion& d,
                                                         uint32_t gen_length,
                                                         const ModelConfig& config);
absl::StatusOr<StreamSettings> StreamSettingsFromRequest(const GenerationRequest::Stream& stream);

// A whole request. `model_path` is the served file (for `model`).
absl::StatusOr<GenerationSpec> ValidateGenerateRequest(const GenerationRequest& request,
                                                       const Model& model,
                                                       absl::string_view model_path);
// A Step session's request: its stream settings are not read (a session
// reports every step).
absl::StatusOr<GenerationSpec> ValidateSessionRequest(const GenerationRequest& request,
                                                      const Model& model,
                                                      absl::string_view model_path);

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_REQUEST_VALIDATION_H_
