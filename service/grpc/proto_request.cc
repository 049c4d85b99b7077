#include "service/grpc/proto_request.h"

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace dllm {
namespace {

absl::Status UnknownValue(absl::string_view field, int value) {
  return InvalidField(field, absl::StrCat("unknown value ", value));
}

GenerationRequest::Prompt PromptFromProto(const v1::Prompt& p) {
  GenerationRequest::Prompt out;
  if (p.input_case() == v1::Prompt::kText) {
    out.input = PromptInput::kText;
    out.text = p.text();
  } else if (p.input_case() == v1::Prompt::kTokenIds) {
    out.input = PromptInput::kTokenIds;
    out.token_ids.assign(p.token_ids().ids().begin(), p.token_ids().ids().end());
  }
  out.apply_chat_template = p.apply_chat_template();
  out.system = p.system();
  out.chat_template = p.chat_template();
  const v1::Suffix& suffix = p.suffix();
  if (suffix.input_case() == v1::Suffix::kText) {
    out.suffix_input = PromptInput::kText;
    out.suffix_text = suffix.text();
  } else if (suffix.input_case() == v1::Suffix::kTokenIds) {
    out.suffix_input = PromptInput::kTokenIds;
    out.suffix_token_ids.assign(suffix.token_ids().ids().begin(), suffix.token_ids().ids().end());
  }
  return out;
}

GenerationRequest::EntropyBound EntropyBoundFromProto(const v1::EntropyBoundParams& e) {
  GenerationRequest::EntropyBound out;
  if (e.has_max_steps()) out.max_steps = e.max_steps();
  if (e.has_t_min()) out.t_min = e.t_min();
  if (e.has_t_max()) out.t_max = e.t_max();
  if (e.has_entropy_bound()) out.entropy_bound = e.entropy_bound();
  if (e.has_stability_threshold()) out.stability_threshold = e.stability_threshold();
  if (e.has_confidence_threshold()) out.confidence_threshold = e.confidence_threshold();
  return out;
}

// The enums first: a value the proto does not define names its field.
absl::Status ReadEnums(const v1::DiffusionParams& d, GenerationRequest::Diffusion* out) {
  if (!v1::Sampler_IsValid(d.sampler())) return UnknownValue("diffusion.sampler", d.sampler());
  if (!v1::Algorithm_IsValid(d.algorithm())) {
    return UnknownValue("diffusion.algorithm", d.algorithm());
  }
  if (!v1::Cache_IsValid(d.cache())) return UnknownValue("diffusion.cache", d.cache());
  out->sampler = SamplerChoiceFromProto(d.sampler());
  if (d.algorithm() != v1::ALGORITHM_UNSPECIFIED)
    out->algorithm = AlgorithmFromProto(d.algorithm());
  if (d.cache() != v1::CACHE_UNSPECIFIED) out->cache = CacheModeFromProto(d.cache());
  return absl::OkStatus();
}

absl::StatusOr<GenerationRequest::Diffusion> DiffusionFromProto(const v1::DiffusionParams& d) {
  GenerationRequest::Diffusion out;
  DLLM_RETURN_IF_ERROR(ReadEnums(d, &out));
  out.gen_length = d.gen_length();
  out.steps = d.steps();
  out.block_length = d.block_length();
  if (d.has_threshold()) out.threshold = d.threshold();
  if (d.has_eps()) out.eps = d.eps();
  out.cfg_scale = d.cfg_scale();
  if (d.has_early_exit()) out.early_exit = d.early_exit();
  out.logits_eos_inf = d.logits_eos_inf();
  out.confidence_eos_eot_inf = d.confidence_eos_eot_inf();
  out.cache_refresh_steps = d.cache_refresh_steps();
  if (d.has_entropy_bound()) out.entropy_bound = EntropyBoundFromProto(d.entropy_bound());
  if (d.has_llada2()) {
    GenerationRequest::Llada2& l = out.llada2.emplace();
    l.steps_per_block = d.llada2().steps_per_block();
    if (d.llada2().has_editing_threshold()) l.editing_threshold = d.llada2().editing_threshold();
    if (d.llada2().has_max_post_steps()) l.max_post_steps = d.llada2().max_post_steps();
  }
  return out;
}

GenerationRequest::Sampling SamplingFromProto(const v1::SamplingParams& s) {
  GenerationRequest::Sampling out;
  out.temperature = s.temperature();
  out.top_p = s.top_p();
  out.top_k = s.top_k();
  out.alg_temp = s.alg_temp();
  if (s.has_seed()) out.seed = s.seed();
  return out;
}

absl::StatusOr<GenerationRequest::Stream> StreamFromProto(const v1::StreamOptions& s) {
  if (!v1::Detail_IsValid(s.detail())) return UnknownValue("stream.detail", s.detail());
  GenerationRequest::Stream out;
  out.detail = s.detail();
  out.step_stride = s.step_stride();
  out.top_candidates = s.top_candidates();
  out.include_timings = s.include_timings();
  out.include_logprobs = s.include_logprobs();
  out.heartbeat_seconds = s.heartbeat_seconds();
  return out;
}

// What a GenerateRequest and an Open both carry: the id, the model, the
// prompt, the diffusion and sampling settings.
template <typename Message>
absl::StatusOr<GenerationRequest> SharedFieldsFromProto(const Message& m) {
  GenerationRequest out;
  out.request_id = m.request_id();
  out.model = m.model();
  out.prompt = PromptFromProto(m.prompt());
  DLLM_ASSIGN_OR_RETURN(out.diffusion, DiffusionFromProto(m.diffusion()));
  out.sampling = SamplingFromProto(m.sampling());
  return out;
}

}  // namespace

absl::StatusOr<GenerationRequest> GenerationRequestFromProto(const v1::GenerateRequest& request) {
  DLLM_ASSIGN_OR_RETURN(GenerationRequest out, SharedFieldsFromProto(request));
  DLLM_ASSIGN_OR_RETURN(out.stream, StreamFromProto(request.stream()));
  return out;
}

absl::StatusOr<GenerationRequest> GenerationRequestFromOpen(const v1::Open& open) {
  return SharedFieldsFromProto(open);
}

absl::StatusOr<GenerationSpec> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                       const Model& model,
                                                       absl::string_view model_path) {
  DLLM_ASSIGN_OR_RETURN(const GenerationRequest r, GenerationRequestFromProto(request));
  return ValidateGenerateRequest(r, model, model_path);
}

absl::StatusOr<GenerationSpec> ValidateOpen(const v1::Open& open, const Model& model,
                                            absl::string_view model_path) {
  DLLM_ASSIGN_OR_RETURN(const GenerationRequest r, GenerationRequestFromOpen(open));
  return ValidateSessionRequest(r, model, model_path);
}

absl::StatusOr<SamplerConfig> SamplerConfigFromProto(const v1::DiffusionParams& diffusion,
                                                     const v1::SamplingParams& sampling,
                                                     const ModelConfig& config) {
  DLLM_ASSIGN_OR_RETURN(const GenerationRequest::Diffusion d, DiffusionFromProto(diffusion));
  return SamplerConfigFromRequest(d, SamplingFromProto(sampling), config);
}

}  // namespace dllm
