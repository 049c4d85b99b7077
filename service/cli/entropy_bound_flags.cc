#include "service/cli/entropy_bound_flags.h"

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace dllm {

absl::StatusOr<EntropyBoundConfig> EntropyBoundConfigFromFlags(const ParsedFlags& f,
                                                               const Model& model) {
  DLLM_ASSIGN_OR_RETURN(EntropyBoundConfig c, EntropyBoundConfigFromGguf(model.file()));
  DLLM_ASSIGN_OR_RETURN(const int64_t steps,
                        f.GetIntInRange("eb-max-steps", c.max_steps, 1, 1 << 20));
  DLLM_ASSIGN_OR_RETURN(const int64_t stability,
                        f.GetIntInRange("eb-stability", c.stability_threshold, 0, 1 << 20));
  DLLM_ASSIGN_OR_RETURN(const double t_min, f.GetDouble("eb-t-min", c.t_min));
  DLLM_ASSIGN_OR_RETURN(const double t_max, f.GetDouble("eb-t-max", c.t_max));
  DLLM_ASSIGN_OR_RETURN(const double bound, f.GetDouble("eb-entropy-bound", c.entropy_bound));
  DLLM_ASSIGN_OR_RETURN(const double confidence,
                        f.GetDouble("eb-confidence", c.confidence_threshold));
  DLLM_ASSIGN_OR_RETURN(const int64_t seed,
                        f.GetIntInRange("seed", static_cast<int64_t>(c.seed), 0, 0xFFFFFFFFll));
  c.max_steps = static_cast<int>(steps);
  c.stability_threshold = static_cast<int>(stability);
  c.t_min = static_cast<float>(t_min);
  c.t_max = static_cast<float>(t_max);
  c.entropy_bound = static_cast<float>(bound);
  c.confidence_threshold = static_cast<float>(confidence);
  c.seed = static_cast<uint32_t>(seed);
  DLLM_RETURN_IF_ERROR(c.Validate());
  return c;
}

absl::StatusOr<CanvasRun> CanvasRunFromFlags(const ParsedFlags& f, int canvas_length) {
  if (f.Has("canvases") && f.Has("gen-length")) {
    return absl::InvalidArgumentError("give --canvases or --gen-length, not both");
  }
  CanvasRun run;
  if (f.Has("gen-length")) {
    DLLM_ASSIGN_OR_RETURN(const int64_t n, f.GetIntInRange("gen-length", 0, 1, 1 << 20));
    run.max_canvases = CanvasesFor(n, canvas_length);
  } else {
    DLLM_ASSIGN_OR_RETURN(const int64_t n, f.GetIntInRange("canvases", 1, 1, 1 << 16));
    run.max_canvases = static_cast<int>(n);
  }
  return run;
}

absl::StatusOr<bool> UsesEntropyBound(const ParsedFlags& f, const ModelConfig& config) {
  const std::string sampler = f.Get("sampler", "auto");
  if (sampler == "auto") return config.canvas_length > 0;
  if (sampler == "entropy-bound") {
    if (config.canvas_length == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sampler entropy-bound: ", ArchName(config.arch),
                       " is not a canvas model (no diffusion.canvas_length)"));
    }
    return true;
  }
  if (sampler == "masked") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--sampler: unknown sampler '", sampler, "' (auto, entropy-bound, masked)"));
}

}  // namespace dllm
