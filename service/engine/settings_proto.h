// The engine's settings as the API's messages spell them: the enums of an
// algorithm and a cache, the entropy-bound sampler's settings, and the
// settings a request with empty DiffusionParams / SamplingParams gets
// (ModelInfo's defaults, the Started event).
#ifndef DLLM_SERVICE_ENGINE_SETTINGS_PROTO_H_
#define DLLM_SERVICE_ENGINE_SETTINGS_PROTO_H_

#include "dllm/v1/dllm.pb.h"
#include "engine/model/model.h"
#include "engine/sampler/entropy_bound_denoiser.h"
#include "engine/sampler/entropy_bound_sampler.h"
#include "engine/sampler/sampler_config.h"
#include "service/engine/generation_request.h"

namespace dllm {

// The proto enums of the engine's settings (Started, ModelInfo's defaults,
// error messages that name a value as the API spells it).
v1::Algorithm AlgorithmToProto(Algorithm algorithm);
v1::Cache CacheModeToProto(CacheMode cache);
// And back, for a value that names one (not *_UNSPECIFIED, which is "unset").
Algorithm AlgorithmFromProto(v1::Algorithm algorithm);
CacheMode CacheModeFromProto(v1::Cache cache);
SamplerChoice SamplerChoiceFromProto(v1::Sampler sampler);
// The settings a request with empty DiffusionParams / SamplingParams gets
// (a canvas model's: the entropy-bound sampler's); sent back, they validate.
v1::DiffusionParams DefaultDiffusionParams(const Model& model);
v1::SamplingParams DefaultSamplingParams(const Model& model);
// The proto of the entropy-bound sampler's settings (Started, the defaults).
v1::EntropyBoundParams EntropyBoundParamsToProto(const EntropyBoundConfig& config);

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_SETTINGS_PROTO_H_
