// A small DAG of work items run as a oneTBB flow graph: built once, run many
// times (one run per transformer layer per step). Independent nodes (q/k/v
// projections, gate/up) run concurrently, each free to use parallel_for
// inside. TBB types stay behind a pimpl.
#ifndef DLLM_ENGINE_PARALLEL_TASK_GRAPH_H_
#define DLLM_ENGINE_PARALLEL_TASK_GRAPH_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dllm {

// Not thread-safe: build it, then Run() from one thread at a time. Create and
// run it in the same tbb::task_arena (the flow graph binds to the arena it
// is built in).
class TaskGraph {
 public:
  TaskGraph();
  ~TaskGraph();
  TaskGraph(const TaskGraph&) = delete;
  TaskGraph& operator=(const TaskGraph&) = delete;

  // Adds a node that runs `body` once all nodes in `after` have finished.
  // Returns its id (ids are dense, in insertion order).
  int AddNode(std::string name, std::function<void()> body, const std::vector<int>& after = {});

  // Runs every node once, respecting dependencies; returns when all are done.
  void Run();

  int size() const;
  const std::string& name(int node) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_PARALLEL_TASK_GRAPH_H_
