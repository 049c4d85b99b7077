#include "engine/parallel/read_bandwidth.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/base/stopwatch.h"

namespace dllm {

double MeasureReadBandwidth(int threads) {
  const size_t n = size_t{384} << 20 >> 3;  // 384 MiB of uint64
  std::vector<uint64_t> buf(n);
  for (size_t i = 0; i < n; i += 512) buf[i] = i;
  tbb::task_arena arena(threads);
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8, 0);
    const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    arena.execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<size_t>(0, n, n / (threads * 16) + 1),
          [&](const tbb::blocked_range<size_t>& r) {
            uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            size_t i = r.begin();
            for (; i + 4 <= r.end(); i += 4) {
              s0 += buf[i], s1 += buf[i + 1], s2 += buf[i + 2], s3 += buf[i + 3];
            }
            for (; i < r.end(); ++i) s0 += buf[i];
            sums[static_cast<size_t>(tbb::this_task_arena::current_thread_index()) * 8] +=
                s0 + s1 + s2 + s3;
          });
    });
    const double seconds = SecondsSince(start);
    volatile uint64_t sink = std::accumulate(sums.begin(), sums.end(), uint64_t{0});
    (void)sink;
    best = std::max(best, n * 8.0 / seconds);
  }
  return best;
}

}  // namespace dllm
