// The oneTBB task arena the engine's work runs in, shaped by a ThreadPlan:
// its concurrency, and on hybrid CPUs with `--cpu-policy performance` a
// constraint to the most performant core type (tbb::info::core_types via
// tbbbind/hwloc).
#ifndef DLLM_ENGINE_PARALLEL_ARENA_H_
#define DLLM_ENGINE_PARALLEL_ARENA_H_

#include <tbb/task_arena.h>

#include <memory>
#include <string>

#include "engine/parallel/cpu_topology.h"

namespace dllm {

std::unique_ptr<tbb::task_arena> MakeArena(const ThreadPlan& plan);

}  // namespace dllm

#endif  // DLLM_ENGINE_PARALLEL_ARENA_H_
