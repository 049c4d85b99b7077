// Wall-clock intervals on the monotonic clock, for timings that are
// reported (per-step milliseconds, load time, latency histograms).
#ifndef DLLM_ENGINE_BASE_STOPWATCH_H_
#define DLLM_ENGINE_BASE_STOPWATCH_H_

#include <chrono>

namespace dllm {

class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;

  Stopwatch() : start_(Clock::now()) {}

  void Restart() { start_ = Clock::now(); }
  double ElapsedSeconds() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }
  double ElapsedMs() const { return ElapsedSeconds() * 1e3; }

 private:
  Clock::time_point start_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_BASE_STOPWATCH_H_
