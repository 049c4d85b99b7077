// Float-weight GEMM tile compiled for the avx2 level (flags in kernels/CMakeLists.txt).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/dequant.h"
#include "kernels/gemm_float.h"

namespace dllm {
namespace {
float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
#include "kernels/gemm_float_impl.h"
}  // namespace

void FloatGemmTileAvx2(const FloatGemmArgs& args, int64_t tile, float* scratch) {
  FloatGemmTileImpl(args, tile, scratch);
}

}  // namespace dllm
