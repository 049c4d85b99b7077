// Scratch for each worker slot of a oneTBB task arena, allocated up front
// for every slot the arena can have, so that hot loops (GEMM tiles,
// attention blocks, sampler rows) never allocate, whichever threads happen
// to take part. Indexed by tbb::this_task_arena::current_thread_index(). A
// slot is the thread's alone only while its user starts no parallel work:
// a thread that waits for a nested parallel_for may run another task in
// the meantime, which would take the same slot. So a task takes its slot
// inside the innermost loop body (attention blocks, GEMM panels) and
// gives it up before it returns.
#ifndef DLLM_ENGINE_PARALLEL_PER_THREAD_H_
#define DLLM_ENGINE_PARALLEL_PER_THREAD_H_

#include <tbb/info.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <vector>

#include "engine/base/status_macros.h"

namespace dllm {

// Slots to allocate: enough for the current arena and for the default one.
inline int ArenaSlotCount() {
  return std::max(tbb::this_task_arena::max_concurrency(), tbb::info::default_concurrency());
}

template <typename T>
class PerThread {
 public:
  PerThread() = default;
  // One T(args...) per arena slot.
  template <typename... Args>
  explicit PerThread(const Args&... args) {
    const int n = ArenaSlotCount();
    items_.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) items_.emplace_back(args...);
  }

  // The calling worker's T. Must be called from inside a task arena.
  T& Local() {
    const int slot = tbb::this_task_arena::current_thread_index();
    DLLM_CHECK(slot >= 0 && slot < static_cast<int>(items_.size()));
    return items_[static_cast<size_t>(slot)];
  }

 private:
  std::vector<T> items_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_PARALLEL_PER_THREAD_H_
