// Resolves the kernel path a binary asked for (`--isa` or the DLLM_ISA
// environment variable) against what this CPU supports. Binaries call this
// once at startup; kernels never read the environment.
#ifndef DLLM_ENGINE_MODEL_ISA_OPTION_H_
#define DLLM_ENGINE_MODEL_ISA_OPTION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu_features.h"

namespace dllm {

// `requested` is "auto", "scalar", "avx2", "avx512"/"avx512vnni" or "amx";
// empty means the DLLM_ISA variable, or "auto" when it is unset. A path the
// CPU (or the kernel's AMX permission) does not allow is FAILED_PRECONDITION
// naming what is supported.
absl::StatusOr<IsaLevel> ResolveIsaLevel(absl::string_view requested);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_ISA_OPTION_H_
