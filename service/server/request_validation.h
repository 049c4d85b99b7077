// Request validation: a GenerateRequest (or a Step session's Open) checked
// field by field and turned into plain engine settings, before any compute.
// Every problem is INVALID_ARGUMENT naming the proto field ("diffusion.
// block_length: 24 does not divide gen_length 128"), a `model` that is not
// the served one included; what the server does not implement is
// UNIMPLEMENTED. Defaults mirror `dllm generate` (service/cli/
// generate_command.cc), so the server and the CLI agree on the same settings.
#ifndef DLLM_SERVICE_SERVER_REQUEST_VALIDATION_H_
#define DLLM_SERVICE_SERVER_REQUEST_VALIDATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/model/model.h"
#include "engine/sampler/entropy_bound_denoiser.h"
#include "engine/sampler/entropy_bound_sampler.h"
#include "engine/sampler/sampler_config.h"

namespace dllm {

// Limits of what one request may ask for (top_candidates, ids, ...).
inline constexpr int kMaxTopCandidates = 8;
inline constexpr size_t kMaxRequestIdBytes = 128;
inline constexpr uint32_t kDefaultHeartbeatSeconds = 10;
inline constexpr uint32_t kMaxHeartbeatSeconds = 3600;

// StreamOptions with defaults applied.
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

// One validated generation: everything the engine needs, no proto left.
struct GenerationSpec {
  std::string request_id;  // client's, or a generated one
  // Resolved defaults, family = the model's. Under the entropy-bound
  // sampler only gen_length (the answer's cap) and seed apply.
  SamplerConfig sampler;
  // Set when the request runs the entropy-bound sampler instead of `sampler`.
  std::optional<EntropyBoundRequest> entropy_bound;
  CachingOptions caching;       // the K/V cache the request asks for (default: exact)
  std::vector<int32_t> prompt;  // token ids after tokenizer / chat template
  std::vector<int32_t> suffix;  // infill: after the generated span (Prompt.suffix)
  StreamSettings stream;
  bool seed_was_set = false;  // false: sampler.seed was drawn by the server

  // Tokens on the canvas: prompt, generated span, suffix (entropy-bound:
  // the prompt and every canvas the run may take).
  int canvas_tokens() const;
  // Steps the request takes at most.
  int planned_steps() const;
};

// Fresh request id ("req-" + 16 hex digits) and seed, from a process-wide
// random source.
std::string NewRequestId();
uint64_t NewSeed();

// The served file's name without its directory, and without ".gguf" too.
absl::string_view ModelFileName(absl::string_view path);
absl::string_view ModelFileStem(absl::string_view path);

// Whether `model` (GenerateRequest.model) names the served model: empty,
// general.name, or the GGUF file name with or without ".gguf".
bool NamesServedModel(absl::string_view model, const Model& served, absl::string_view path);

// The template a request names (`field` for errors, e.g.
// "prompt.chat_template"), or the served model's when `name` is empty.
absl::StatusOr<ChatTemplate> RequestChatTemplate(absl::string_view name, const Model& model,
                                                 absl::string_view field);

// Prompt, DiffusionParams and SamplingParams of GenerateRequest and Open.
absl::StatusOr<std::vector<int32_t>> ValidatePrompt(const v1::Prompt& prompt, const Model& model);
// Prompt.suffix (infill): its ids, empty when none is set.
absl::StatusOr<std::vector<int32_t>> ValidateSuffix(const v1::Prompt& prompt, const Model& model);

// A text to encode as Generate, Open and Tokenize take it: the encoding
// options (how.chat is the request's apply_chat_template) and the name of a
// chat template to use instead of the model's.
struct TextPrompt {
  absl::string_view text;
  absl::string_view chat_template;
  PromptEncoding how;
};
// The checks and the encoding every text prompt gets, whatever the RPC:
// UTF-8, system and chat_template only with apply_chat_template, a known
// template; errors name `field_prefix` + the field ("prompt.text", "text").
// Length bounds are the caller's (they differ per RPC).
absl::StatusOr<std::vector<int32_t>> EncodeTextPrompt(const TextPrompt& prompt, const Model& model,
                                                      absl::string_view field_prefix);
// The engine's cache mode for the proto's (UNSPECIFIED: none). The value
// must be a valid Cache (SamplerConfigFromProto checks it).
CacheMode CacheModeFromProto(v1::Cache cache);
absl::StatusOr<SamplerConfig> SamplerConfigFromProto(const v1::DiffusionParams& diffusion,
                                                     const v1::SamplingParams& sampling,
                                                     const ModelConfig& config);
// Whether a request's DiffusionParams run the entropy-bound sampler
// (diffusion.sampler, or the model's default: canvas models run it).
absl::StatusOr<bool> UsesEntropyBound(const v1::DiffusionParams& diffusion,
                                      const ModelConfig& config);
// The entropy-bound sampler's settings of a request: the file's, under
// diffusion.entropy_bound; its canvases from gen_length; the cache
// (exact unless CACHE_NONE) into `caching`. The masked samplers' settings
// are refused, naming the field. The seed is the caller's.
absl::StatusOr<EntropyBoundRequest> EntropyBoundFromProto(const v1::DiffusionParams& diffusion,
                                                          const v1::SamplingParams& sampling,
                                                          const Model& model,
                                                          CachingOptions* caching);
// The request's cache settings (diffusion.cache, diffusion.cache_refresh_steps),
// checked against its `gen_length`.
absl::StatusOr<CachingOptions> CachingOptionsFromProto(const v1::DiffusionParams& diffusion,
                                                       int gen_length);
absl::StatusOr<StreamSettings> StreamSettingsFromProto(const v1::StreamOptions& stream);

// A whole GenerateRequest. `model_path` is the served file (for `model`).
absl::StatusOr<GenerationSpec> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                       const Model& model,
                                                       absl::string_view model_path);
// A Step session's Open (stream settings stay at their defaults).
absl::StatusOr<GenerationSpec> ValidateOpen(const v1::Open& open, const Model& model,
                                            absl::string_view model_path);

// The proto enum of an engine algorithm and back.
v1::Algorithm AlgorithmToProto(Algorithm algorithm);
// The settings a request with empty DiffusionParams / SamplingParams gets
// (a canvas model's: the entropy-bound sampler's); sent back, they validate.
v1::DiffusionParams DefaultDiffusionParams(const Model& model);
v1::SamplingParams DefaultSamplingParams(const Model& model);
// The proto of the entropy-bound sampler's settings (Started, the defaults).
v1::EntropyBoundParams EntropyBoundParamsToProto(const EntropyBoundConfig& config);

}  // namespace dllm

#endif  // DLLM_SERVICE_SERVER_REQUEST_VALIDATION_H_
