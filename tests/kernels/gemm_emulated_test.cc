// Runs the AVX-VNNI, AVX-512 VNNI and AMX GEMM kernels on any x86-64 CPU: their
// sources are compiled into this test a second time against
// emu/immintrin.h (SIMDe + an AMX emulator), in namespace
// `gemm_internal_emu`, so their logic, tile shapes and tails are checked
// even where the hardware paths cannot run. Speed and the GCC tile-config
// trap still need the real CPU (gemm_test, gemm_amx_o2_test).
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemm.h"
#include "tests/kernels/gemm_test_util.h"

namespace dllm::gemm_internal_emu {
void FillAvxVnniKernels(GemmKernels* k);
void FillAvx512VnniKernels(GemmKernels* k);
void FillAmxKernels(GemmKernels* k);
}  // namespace dllm::gemm_internal_emu

namespace dllm {
namespace {

struct Emulated {
  const char* name;
  GemmKernels kernels;
};

std::vector<Emulated> EmulatedKernels() {
  std::vector<Emulated> out(3);
  out[0].name = "avx512vnni(emulated)";
  gemm_internal_emu::FillAvx512VnniKernels(&out[0].kernels);
  out[1].name = "amx(emulated)";
  gemm_internal_emu::FillAmxKernels(&out[1].kernels);
  out[2].name = "avxvnni(emulated)";
  gemm_internal_emu::FillAvxVnniKernels(&out[2].kernels);
  return out;
}

const GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
                           GgmlType::kQ5_K, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                           GgmlType::kF16,  GgmlType::kBF16, GgmlType::kF32};

TEST(GemmEmulatedTest, EveryTypeRaggedShapes) {
  const std::vector<Emulated> all = EmulatedKernels();
  uint32_t seed = 11;
  for (GgmlType type : kTypes) {
    const int64_t kb = PackKMultiple(type);
    for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {9, 33}, {17, 16}, {40, 50}}) {
      testing::Problem p(type, m, n, kb * 2, seed++);
      for (const Emulated& e : all) {
        testing::CheckGemm(p, e.kernels, e.name, {}, 2);
        testing::CheckGemm(p, e.kernels, e.name, {}, 0);
      }
    }
  }
}

TEST(GemmEmulatedTest, SelectedRowsAndTallTiles) {
  const std::vector<Emulated> all = EmulatedKernels();
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    testing::Problem p(type, 150, 35, 256, 3);
    const std::vector<int32_t> rows = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                       11, 12, 13, 14, 15, 16, 40, 41, 99, 149};
    for (const Emulated& e : all) {
      testing::CheckGemm(p, e.kernels, e.name, {}, 1);
      testing::CheckGemm(p, e.kernels, e.name, rows, 2);
      testing::CheckGemm(p, e.kernels, e.name, rows, 0);
    }
  }
}

}  // namespace
}  // namespace dllm
