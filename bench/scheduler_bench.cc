// Dynamic tile scheduling vs a static split when one worker is slow: a
// simulated efficiency core (worker 1 sleeps `slowdown` x the compute time
// of every tile it runs). With dynamic hand-out the fast worker takes more
// tiles, so the cost of the slow one stays near its lost throughput; a
// static split waits for the slow half.
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <chrono>
#include <thread>

#include "benchmark/benchmark.h"

namespace {

constexpr int kTiles = 64;  // 32 tiles per thread on 2 threads

double BusyWork(int iterations) {
  double acc = 1.0;
  for (int i = 0; i < iterations; ++i) acc = acc * 1.0000001 + 1e-9;
  return acc;
}

// Runs one tile; worker 1 then sleeps `slowdown` times as long as it worked.
void RunTile(int iterations, double slowdown, double* sink) {
  const auto start = std::chrono::steady_clock::now();
  *sink += BusyWork(iterations);
  if (slowdown > 0 && tbb::this_task_arena::current_thread_index() == 1) {
    std::this_thread::sleep_for((std::chrono::steady_clock::now() - start) * slowdown);
  }
}

template <bool kDynamic>
void BM_Tiles(benchmark::State& state) {
  const double slowdown = static_cast<double>(state.range(0));
  const int iterations = 200000;  // ~0.2 ms of compute per tile
  tbb::task_arena arena(2);
  double sink = 0;
  for (auto _ : state) {
    arena.execute([&] {
      tbb::enumerable_thread_specific<double> local(0.0);
      if constexpr (kDynamic) {
        tbb::parallel_for(
            tbb::blocked_range<int>(0, kTiles, 1),
            [&](const tbb::blocked_range<int>& r) {
              for (int t = r.begin(); t != r.end(); ++t) {
                RunTile(iterations, slowdown, &local.local());
              }
            },
            tbb::simple_partitioner());
      } else {
        tbb::parallel_for(
            tbb::blocked_range<int>(0, kTiles, kTiles / 2),
            [&](const tbb::blocked_range<int>& r) {
              for (int t = r.begin(); t != r.end(); ++t) {
                RunTile(iterations, slowdown, &local.local());
              }
            },
            tbb::static_partitioner());
      }
      sink += local.combine([](double a, double b) { return a + b; });
    });
  }
  benchmark::DoNotOptimize(sink);
  state.counters["slowdown"] = slowdown;
}

// Arg: how many times longer worker 1 takes per tile (0 = equal cores,
// 3 = a core 4x slower, roughly an E-core under a vector-heavy load).
BENCHMARK(BM_Tiles<true>)
    ->Name("BM_DynamicTiles")
    ->Arg(0)
    ->Arg(1)
    ->Arg(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Tiles<false>)
    ->Name("BM_StaticSplit")
    ->Arg(0)
    ->Arg(1)
    ->Arg(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
