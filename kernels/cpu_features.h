// What this CPU and kernel let the kernels use: CPUID feature bits, OS support
// for the vector state (XCR0), and Linux's permission to use AMX tile data.
// Everything else in kernels/ dispatches on `IsaLevel`, never on CPUID.
#ifndef DLLM_KERNELS_CPU_FEATURES_H_
#define DLLM_KERNELS_CPU_FEATURES_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dllm {

// Kernel paths, in increasing order of capability. Each level implies the
// ones below it on any CPU that has it.
enum class IsaLevel { kScalar = 0, kAvx2 = 1, kAvx512Vnni = 2, kAmx = 3 };

const char* IsaLevelName(IsaLevel level);  // "scalar", "avx2", ...
// Accepts the names above plus "avx512" as an alias of "avx512vnni".
std::optional<IsaLevel> ParseIsaLevel(std::string_view name);

struct CpuFeatures {
  std::string vendor;  // e.g. "GenuineIntel"
  std::string brand;   // e.g. "Intel(R) Xeon(R) Platinum 8480+"
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx_vnni = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
  bool os_avx = false;            // XCR0 enables YMM state
  bool os_avx512 = false;         // XCR0 enables opmask and ZMM state
  bool os_amx = false;            // XCR0 enables tile config and tile data
  bool amx_permitted = false;     // arch_prctl(ARCH_REQ_XCOMP_PERM) succeeded
  std::string amx_denied_reason;  // why AMX is unusable, when the CPU has it
};

// Probes once (CPUID, XGETBV, and the AMX permission request) and caches.
const CpuFeatures& GetCpuFeatures();

// The best level the CPU and OS allow.
IsaLevel BestIsaLevel();

// Every level this machine can run, scalar first. Tests loop over it.
std::vector<IsaLevel> SupportedIsaLevels();

bool IsaLevelSupported(IsaLevel level);

// Space-separated feature names, e.g. "avx2 fma avx512vnni amx-int8".
std::string CpuFlagsString(const CpuFeatures& features);

}  // namespace dllm

#endif  // DLLM_KERNELS_CPU_FEATURES_H_
