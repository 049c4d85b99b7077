#include "engine/parallel/task_graph.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"

namespace dllm {
namespace {

TEST(TaskGraphTest, RunsEveryNodeAfterItsDependenciesOnEveryRun) {
  TaskGraph graph;
  std::mutex mu;
  std::vector<std::string> order;
  auto record = [&](const char* name) {
    return [&, name] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(name);
    };
  };
  const int a = graph.AddNode("a", record("a"));
  const int b = graph.AddNode("b", record("b"), {a});
  const int c = graph.AddNode("c", record("c"), {a});
  graph.AddNode("d", record("d"), {b, c});
  EXPECT_EQ(graph.size(), 4);
  EXPECT_EQ(graph.name(b), "b");
  for (int run = 0; run < 3; ++run) {
    order.clear();
    graph.Run();
    ASSERT_EQ(order.size(), 4u);
    EXPECT_EQ(order.front(), "a");
    EXPECT_EQ(order.back(), "d");
  }
}

TEST(TaskGraphTest, IndependentNodesCanOverlap) {
  // Two nodes that each wait for the other to start: this only finishes if
  // the graph runs them concurrently (needs >= 2 threads).
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs 2 threads";
  TaskGraph graph;
  std::atomic<int> started{0};
  auto body = [&] {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  };
  const int root = graph.AddNode("root", [] {});
  graph.AddNode("left", body, {root});
  graph.AddNode("right", body, {root});
  graph.Run();
  EXPECT_EQ(started.load(), 2);
}

}  // namespace
}  // namespace dllm
