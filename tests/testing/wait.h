// Waiting in tests for something another thread does, with a bound: a
// condition that never comes fails the test instead of hanging it until
// ctest's timeout.
#ifndef DLLM_TESTS_TESTING_WAIT_H_
#define DLLM_TESTS_TESTING_WAIT_H_

#include <chrono>
#include <thread>

namespace dllm::testing {

// Polls `done` about every millisecond until it returns true (then true) or
// `timeout` passes (then false). Use as EXPECT_TRUE(WaitUntil(...)).
template <typename Condition>
bool WaitUntil(Condition done, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_TESTING_WAIT_H_
