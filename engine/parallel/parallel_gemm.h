// The oneTBB driver of the GEMM tiles of kernels/gemm.h: hands output tiles
// out dynamically (one task per tile, work stealing; never a static split)
// to the threads of a task arena, and the parallel activation quantizer.
#ifndef DLLM_ENGINE_PARALLEL_PARALLEL_GEMM_H_
#define DLLM_ENGINE_PARALLEL_PARALLEL_GEMM_H_

#include <oneapi/tbb/task_arena.h>

#include "kernels/gemm.h"

namespace dllm {

// Computes Y = X W^T for `args` (see kernels/gemm.h) on the threads of
// `arena`, or of the arena the caller runs in when `arena` is null. Tiles are
// sized for the arena's concurrency (PlanGemmTiles: >= 8 per thread where the
// shape allows). Blocks until every tile is done. Allocates nothing beyond
// TBB's task objects. Results are bit-identical to `Gemm(kernels, args)`.
void ParallelGemm(const GemmKernels& kernels, const GemmArgs& args,
                  tbb::task_arena* arena = nullptr);

// Quantizes x row rows[i] (rows null: row i), i < m, into row i of `xq`
// (xq.rows >= m, xq.cols the row width), in parallel over row blocks, on
// the threads of `arena` or the caller's. Bit-identical to the serial
// QuantizeGatheredRows / QuantizeRows.
void ParallelQuantizeRows(const float* x, int64_t ldx, const int32_t* rows, int64_t m,
                          const QuantizedRows& xq, tbb::task_arena* arena = nullptr);

}  // namespace dllm

#endif  // DLLM_ENGINE_PARALLEL_PARALLEL_GEMM_H_
