// The AMX kernel source compiled a second time at -O2 (the library builds it
// at -O3), in namespace `gemm_internal_o2`: GCC 12 may drop tile-config
// stores at some optimisation levels and not others (forward-pass.md
// section 6), so both builds must run. Skips where AMX is unavailable.
#include "gtest/gtest.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm.h"
#include "tests/kernels/gemm_test_util.h"

namespace dllm::gemm_internal_o2 {
void FillAmxKernels(GemmKernels* k);
}  // namespace dllm::gemm_internal_o2

namespace dllm {
namespace {

TEST(GemmAmxO2Test, MatchesFloat64Product) {
  if (!IsaLevelSupported(IsaLevel::kAmx)) GTEST_SKIP() << "AMX not available on this machine";
  GemmKernels k;
  gemm_internal_o2::FillAmxKernels(&k);
  uint32_t seed = 21;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    testing::Problem p(type, 40, 50, 512, seed++);
    testing::CheckGemm(p, k, "amx-O2", {}, 2);
    testing::CheckGemm(p, k, "amx-O2", {}, 0);
  }
}

}  // namespace
}  // namespace dllm
