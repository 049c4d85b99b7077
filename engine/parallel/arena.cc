#include "engine/parallel/arena.h"

#include <tbb/info.h>
#include <tbb/task_arena.h>

namespace dllm {

std::unique_ptr<tbb::task_arena> MakeArena(const ThreadPlan& plan) {
  tbb::task_arena::constraints constraints;
  constraints.set_max_concurrency(plan.threads);
  const std::vector<tbb::core_type_id> types = tbb::info::core_types();
  // core_types() lists types from least to most performant.
  if (plan.performance_cores_only && types.size() > 1) constraints.set_core_type(types.back());
  return std::make_unique<tbb::task_arena>(constraints);
}

}  // namespace dllm
