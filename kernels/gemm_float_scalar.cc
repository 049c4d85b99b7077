// Float-weight GEMM tile compiled for the scalar level (flags in kernels/CMakeLists.txt).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/dequant.h"
#include "kernels/gemm_float.h"

namespace dllm {
namespace {
float HalfToFloat(uint16_t h) { return Fp16ToFp32(h); }
#include "kernels/gemm_float_impl.h"
}  // namespace

void FloatGemmTileScalar(const FloatGemmArgs& args, int64_t tile, float* scratch) {
  FloatGemmTileImpl(args, tile, scratch);
}

}  // namespace dllm
