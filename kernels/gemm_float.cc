// Picks the float-weight GEMM tile for an ISA level.
#include "kernels/gemm_float.h"

namespace dllm {

void FloatGemmTileScalar(const FloatGemmArgs&, int64_t, float*);
void FloatGemmTileAvx2(const FloatGemmArgs&, int64_t, float*);
void FloatGemmTileAvx512(const FloatGemmArgs&, int64_t, float*);

FloatGemmTileFn SelectFloatGemm(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar:
      return &FloatGemmTileScalar;
    case IsaLevel::kAvx2:
      return &FloatGemmTileAvx2;
    case IsaLevel::kAvx512Vnni:
    case IsaLevel::kAmx:
      return &FloatGemmTileAvx512;
  }
  return &FloatGemmTileScalar;
}

}  // namespace dllm
