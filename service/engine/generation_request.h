// GenerationRequest: what a front end asks of one generation, in the
// engine's types, before any default or check. Every front end produces
// one (gRPC from its GenerateRequest or Open, HTTP from an OpenAI or
// /infill body, the CLI from its flags) and request_validation.h turns it
// into a GenerationSpec, so a setting's rules are written once.
//
// Fields are grouped and named as their error messages name them
// ("diffusion.block_length: 24 does not divide gen_length 128"), the same
// paths the gRPC API's fields have; a front end with other names maps the
// path to its own (service/http/api_error.cc). Zero, empty and nullopt mean
// "not set: the model's default", as in the proto.
#ifndef DLLM_SERVICE_ENGINE_GENERATION_REQUEST_H_
#define DLLM_SERVICE_ENGINE_GENERATION_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dllm/v1/dllm.pb.h"
#include "engine/sampler/sampler_config.h"

namespace dllm {

// Which of its two forms a prompt (or a suffix) takes; kNone: not given.
enum class PromptInput { kNone, kText, kTokenIds };

// Which sampler a request runs; kModelDefault: the entropy-bound sampler on
// canvas models, the masked samplers elsewhere.
enum class SamplerChoice { kModelDefault, kMasked, kEntropyBound };

struct GenerationRequest {
  std::string request_id;  // empty: the server makes one
  std::string model;       // empty: the served model

  struct Prompt {
    PromptInput input = PromptInput::kNone;
    std::string text;                 // kText
    std::vector<uint32_t> token_ids;  // kTokenIds: used as they are
    bool apply_chat_template = false;
    std::string system;
    std::string chat_template;  // a template name; empty: the model's
    // Infill: the text after the generated span.
    PromptInput suffix_input = PromptInput::kNone;
    std::string suffix_text;
    std::vector<uint32_t> suffix_token_ids;
  } prompt;

  // DiffusionGemma's entropy-bound sampler: each unset field is the file's.
  struct EntropyBound {
    std::optional<uint32_t> max_steps;
    std::optional<float> t_min;
    std::optional<float> t_max;
    std::optional<float> entropy_bound;
    std::optional<uint32_t> stability_threshold;
    std::optional<float> confidence_threshold;
    // Whether any field is set (an empty message stays unset).
    bool any() const {
      return max_steps || t_min || t_max || entropy_bound || stability_threshold ||
             confidence_threshold;
    }
  };
  // LLaDA2's block schedule.
  struct Llada2 {
    uint32_t steps_per_block = 0;
    std::optional<float> editing_threshold;
    std::optional<uint32_t> max_post_steps;
  };

  struct Diffusion {
    uint32_t gen_length = 0;
    uint32_t steps = 0;
    uint32_t block_length = 0;
    std::optional<Algorithm> algorithm;
    std::optional<float> threshold;
    std::optional<float> eps;
    float cfg_scale = 0;
    std::optional<bool> early_exit;
    bool logits_eos_inf = false;
    bool confidence_eos_eot_inf = false;
    std::optional<CacheMode> cache;
    uint32_t cache_refresh_steps = 0;
    SamplerChoice sampler = SamplerChoice::kModelDefault;
    std::optional<EntropyBound> entropy_bound;
    std::optional<Llada2> llada2;
  } diffusion;

  struct Sampling {
    float temperature = 0;
    float top_p = 0;
    uint32_t top_k = 0;
    float alg_temp = 0;
    std::optional<uint64_t> seed;  // unset: the server draws one
  } sampling;

  // How the events come back (a Step session's stay at the defaults).
  struct Stream {
    v1::Detail detail = v1::DETAIL_UNSPECIFIED;
    uint32_t step_stride = 0;
    uint32_t top_candidates = 0;
    bool include_timings = false;
    bool include_logprobs = false;
    uint32_t heartbeat_seconds = 0;
  } stream;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_GENERATION_REQUEST_H_
