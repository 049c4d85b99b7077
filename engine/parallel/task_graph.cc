#include "engine/parallel/task_graph.h"

#include <tbb/flow_graph.h>

#include <deque>

#include "engine/base/status_macros.h"

namespace dllm {

using tbb::flow::continue_msg;

struct TaskGraph::Impl {
  tbb::flow::graph graph;
  tbb::flow::broadcast_node<continue_msg> start{graph};
  // deque: nodes must not move once edges point at them.
  std::deque<tbb::flow::continue_node<continue_msg>> nodes;
  std::vector<std::string> names;
  std::vector<bool> has_input;
};

TaskGraph::TaskGraph() : impl_(std::make_unique<Impl>()) {}
TaskGraph::~TaskGraph() = default;

int TaskGraph::AddNode(std::string name, std::function<void()> body, const std::vector<int>& after) {
  const int id = static_cast<int>(impl_->nodes.size());
  impl_->nodes.emplace_back(impl_->graph, [body = std::move(body)](const continue_msg&) {
    body();
    return continue_msg();
  });
  impl_->names.push_back(std::move(name));
  impl_->has_input.push_back(!after.empty());
  for (int dep : after) {
    DLLM_CHECK(dep >= 0 && dep < id);
    tbb::flow::make_edge(impl_->nodes[static_cast<size_t>(dep)], impl_->nodes.back());
  }
  if (after.empty()) tbb::flow::make_edge(impl_->start, impl_->nodes.back());
  return id;
}

void TaskGraph::Run() {
  impl_->start.try_put(continue_msg());
  impl_->graph.wait_for_all();
}

int TaskGraph::size() const { return static_cast<int>(impl_->nodes.size()); }
const std::string& TaskGraph::name(int node) const { return impl_->names[static_cast<size_t>(node)]; }

}  // namespace dllm
