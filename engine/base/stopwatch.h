// Wall-clock intervals on the monotonic clock, for timings that are
// reported (per-step milliseconds, load time, latency histograms).
#ifndef DLLM_ENGINE_BASE_STOPWATCH_H_
#define DLLM_ENGINE_BASE_STOPWATCH_H_

#include <chrono>

namespace dllm {

using MonotonicClock = std::chrono::steady_clock;

// Seconds from `earlier` to `later`.
inline double SecondsBetween(MonotonicClock::time_point earlier, MonotonicClock::time_point later) {
  return std::chrono::duration<double>(later - earlier).count();
}
// Seconds from `start` to now.
inline double SecondsSince(MonotonicClock::time_point start) {
  return SecondsBetween(start, MonotonicClock::now());
}

class Stopwatch {
 public:
  using Clock = MonotonicClock;

  Stopwatch() : start_(Clock::now()) {}

  void Restart() { start_ = Clock::now(); }
  double ElapsedSeconds() const { return SecondsSince(start_); }
  double ElapsedMs() const { return ElapsedSeconds() * 1e3; }

 private:
  Clock::time_point start_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_BASE_STOPWATCH_H_
