// ParallelGemm: tbb::parallel_for over tile indices, one tile per task.
#include "engine/parallel/parallel_gemm.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

namespace dllm {

void ParallelGemm(const GemmKernels& kernels, const GemmArgs& args, tbb::task_arena* arena) {
  auto run = [&] {
    const int threads = tbb::this_task_arena::max_concurrency();
    const GemmTiling tiling = PlanGemmTiles(kernels, args, threads);
    if (tiling.num_tiles() == 0) return;
    // simple_partitioner with grain 1: every tile is its own task, so idle
    // threads steal tiles as they free up (tiles differ in cost at the
    // ragged edges and when cores are shared).
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, tiling.num_tiles(), 1),
        [&](const tbb::blocked_range<int64_t>& range) {
          for (int64_t t = range.begin(); t != range.end(); ++t)
            RunGemmTile(kernels, args, tiling, t);
        },
        tbb::simple_partitioner());
  };
  if (arena != nullptr) {
    arena->execute(run);
  } else {
    run();
  }
}

void ParallelQuantizeRows(const float* x, int64_t ldx, const int32_t* rows, int64_t m,
                          const QuantizedRows& xq, tbb::task_arena* arena) {
  auto run = [&] {
    constexpr int64_t kRowsPerTask = 16;
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, m, kRowsPerTask),
                      [&](const tbb::blocked_range<int64_t>& range) {
                        QuantizedRows part = xq;  // rows [begin, end) of xq
                        const int64_t b = range.begin(), n = range.end() - range.begin();
                        part.q += b * xq.cols;
                        part.scale += b * (xq.cols / kActBlock);
                        part.sum16 += b * (xq.cols / 16);
                        if (rows != nullptr) {
                          QuantizeGatheredRows(x, ldx, rows + b, n, part);
                        } else {
                          QuantizeRows(x + b * ldx, ldx, n, part);
                        }
                      });
  };
  if (arena != nullptr) {
    arena->execute(run);
  } else {
    run();
  }
}

}  // namespace dllm
