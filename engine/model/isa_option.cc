#include "engine/model/isa_option.h"

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dllm {

absl::StatusOr<IsaLevel> ResolveIsaLevel(absl::string_view requested) {
  std::string source = "--isa";
  std::string name(requested);
  if (name.empty()) {
    const char* env = std::getenv("DLLM_ISA");
    name = env ? env : "auto";
    source = "DLLM_ISA";
  }
  if (name == "auto") return BestIsaLevel();
  const std::optional<IsaLevel> level = ParseIsaLevel(std::string_view(name.data(), name.size()));
  if (!level) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, "=", name, " is not a kernel path (auto, scalar, avx2, avx512, amx)"));
  }
  if (!IsaLevelSupported(*level)) {
    std::string supported;
    for (IsaLevel l : SupportedIsaLevels()) absl::StrAppend(&supported, " ", IsaLevelName(l));
    std::string why;
    const CpuFeatures& f = GetCpuFeatures();
    if (*level == IsaLevel::kAmx && f.amx_tile && !f.amx_permitted) {
      why = absl::StrCat(" (", f.amx_denied_reason, ")");
    }
    return absl::FailedPreconditionError(
        absl::StrCat(source, "=", name, " but this CPU lacks it", why, "; supported:", supported));
  }
  return *level;
}

}  // namespace dllm
