// Y = X * W^T for int8-quantized activations X (quantize_act.h) and packed
// weights W (quantized_matrix.h): Y is M x N floats, X is M x K, W is N x K.
// Non-SIMD part: the kernel table per ISA and the tile decomposition. The
// parallel driver lives in engine/parallel/parallel_gemm.h (kernels/ does
// not depend on TBB); here `Gemm` runs all tiles on the calling thread.
//
// Accumulation: for each weight scale group (16 or 32 elements) the integer
// dot of codes and activation codes is exact in int32; it is scaled in float,
//   y += s_x * (d * dot(u, q) + c * sum(q)),
// so the only error beyond the activation quantization (quantize_act.h) is
// float rounding of these per-group terms. Where c = -2^shift d exactly
// (QuantizedMatrix::offset_shift), a kernel may take the offset into the
// integer dot, d * (dot(u, q) - 2^shift sum(q)), one rounding fewer: each
// path has its own bits, all within the same bound of the exact product.
//
// Every path computes each Y row from its own X row with the same operations
// whatever M, the tiling or the thread count (gemm_test holds it bit for
// bit): batched requests get the bits they get alone.
//
// Tails: any M and N. Tiles cover whole 16-row weight panels; the padding
// rows of the last panel are computed and dropped, never written to Y.
#ifndef DLLM_KERNELS_GEMM_H_
#define DLLM_KERNELS_GEMM_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/quantize_act.h"
#include "kernels/quantized_matrix.h"

namespace dllm {

struct GemmArgs {
  const QuantizedMatrix* w = nullptr;  // N x K packed weights
  const QuantizedRows* x = nullptr;    // M x K, K == w->cols
  float* y = nullptr;                  // M x N, row stride `y_stride` floats
  int64_t y_stride = 0;
  // Rows of X/Y to compute: 0..num_rows (a caller that wants other rows
  // gathers them into X first: QuantizeGatheredRows). Y rows past them are
  // left untouched.
  int64_t num_rows = 0;
};

// Computes the Y rectangle of rows [row_begin, row_end) and
// panels [panel_begin, panel_end).
using GemmTileFn = void (*)(const GemmArgs& args, int64_t row_begin, int64_t row_end,
                            int64_t panel_begin, int64_t panel_end);

// One ISA's kernels, indexed by PackKind. Filled once; safe to share.
struct GemmKernels {
  IsaLevel isa = IsaLevel::kScalar;
  GemmTileFn tile[kNumPackKinds] = {};
  // The kernels' register tile: X rows and weight panels computed together.
  // PlanGemmTiles makes tiles multiples of them where the shape allows
  // (any tile is correct; ragged ones run slower edge blocks).
  int row_block = 1;
  int panel_block = 1;
};

// The table for `level`, which must be supported by this CPU
// (IsaLevelSupported). Hold on to the reference; it never changes. kAvx2
// runs AVX-VNNI's `vpdpbusd` where the CPU has it, plain AVX2 otherwise.
const GemmKernels& SelectGemmKernels(IsaLevel level);

// Every table this CPU can run, named: one per supported level, plus plain
// AVX2 where kAvx2 runs AVX-VNNI, so tests and benchmarks reach both.
struct NamedGemmKernels {
  const char* name;  // "scalar", "avx2", "avxvnni", "avx512vnni", "amx"
  const GemmKernels* kernels;
};
std::vector<NamedGemmKernels> RunnableGemmKernels();

// Output tiles: `tile_rows` rows by `tile_panels` panels of 16 columns,
// rows fastest. Sized so each of `num_threads` threads gets at least 8 tiles
// when the shape allows, while keeping tiles tall (weights unpacked once per
// tile are reused by every row of it).
struct GemmTiling {
  int64_t tile_rows = 1;
  int64_t tile_panels = 1;
  int64_t row_tiles = 0;
  int64_t panel_tiles = 0;
  int64_t num_tiles() const { return row_tiles * panel_tiles; }
};
GemmTiling PlanGemmTiles(const GemmKernels& kernels, const GemmArgs& args, int num_threads);

// Computes tile `tile` in [0, tiling.num_tiles()). Tiles write disjoint parts
// of Y, so any number may run concurrently.
void RunGemmTile(const GemmKernels& kernels, const GemmArgs& args, const GemmTiling& tiling,
                 int64_t tile);

// All tiles, on the calling thread.
void Gemm(const GemmKernels& kernels, const GemmArgs& args);

}  // namespace dllm

#endif  // DLLM_KERNELS_GEMM_H_
