#include "engine/parallel/cpu_topology.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;

// Writes the sysfs topology files of logical CPU `cpu` on physical core `core`.
void WriteCpu(const std::string& root, int cpu, int core) {
  const std::string dir = root + "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology";
  fs::create_directories(dir);
  testing::WriteFileOrDie(dir + "/core_id", std::to_string(core) + "\n");
  testing::WriteFileOrDie(dir + "/physical_package_id", "0\n");
}

// A hybrid CPU: 2 P-cores with SMT (cpus 0-3) and 4 E-cores (cpus 4-7).
void WriteHybridTree(const std::string& root) {
  for (int c = 0; c < 4; ++c) WriteCpu(root, c, c / 2);
  for (int c = 4; c < 8; ++c) WriteCpu(root, c, 8 + c);
  fs::create_directories(root + "/sys/devices/cpu_core");
  fs::create_directories(root + "/sys/devices/cpu_atom");
  testing::WriteFileOrDie(root + "/sys/devices/cpu_core/cpus", "0-3\n");
  testing::WriteFileOrDie(root + "/sys/devices/cpu_atom/cpus", "4-7\n");
}

TEST(CpuTopologyTest, ParsesCpuLists) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_TRUE(ParseCpuList("").empty());
}

TEST(CpuTopologyTest, DetectsHybridCoresFromSysfs) {
  const std::string root = testing::TempDir();
  WriteHybridTree(root);
  const CpuTopology t = ReadCpuTopology(root, {0, 1, 2, 3, 4, 5, 6, 7}, false);
  EXPECT_TRUE(t.hybrid());
  EXPECT_EQ(t.physical_cores, 6);
  EXPECT_EQ(t.performance_cpus.size(), 4u);
  EXPECT_EQ(t.efficiency_cpus.size(), 4u);
  EXPECT_EQ(t.core_type_source, "sysfs");
  EXPECT_EQ(t.UsableThreads(), 6);
}

TEST(CpuTopologyTest, AffinityAndCgroupQuotaCapThreads) {
  const std::string root = testing::TempDir();
  for (int c = 0; c < 8; ++c) WriteCpu(root, c, c);
  fs::create_directories(root + "/sys/fs/cgroup");
  testing::WriteFileOrDie(root + "/sys/fs/cgroup/cpu.max", "250000 100000\n");
  const CpuTopology t = ReadCpuTopology(root, {0, 1, 2, 3, 4, 5}, false);
  EXPECT_FALSE(t.hybrid());
  EXPECT_EQ(t.physical_cores, 6);
  ASSERT_TRUE(t.cgroup_cpu_quota.has_value());
  EXPECT_DOUBLE_EQ(*t.cgroup_cpu_quota, 2.5);
  EXPECT_EQ(t.UsableThreads(), 3);
}

TEST(CpuTopologyTest, PerformancePolicyUsesOnlyPerformanceCores) {
  const std::string root = testing::TempDir();
  WriteHybridTree(root);  // 6 physical cores
  const CpuTopology t = ReadCpuTopology(root, {0, 1, 2, 3, 4, 5, 6, 7}, false);
  const ThreadPlan all = PlanThreads(t, CpuPolicy::kAll, 0);
  EXPECT_EQ(all.threads, 6);
  EXPECT_FALSE(all.performance_cores_only);
  const ThreadPlan perf = PlanThreads(t, CpuPolicy::kPerformance, 0);
  EXPECT_TRUE(perf.performance_cores_only);
  EXPECT_EQ(perf.threads, 3);  // 4 of 8 logical CPUs are P: half the 6 cores, rounded down
  EXPECT_EQ(PlanThreads(t, CpuPolicy::kAuto, 2).threads, 2);
  EXPECT_EQ(PlanThreads(t, CpuPolicy::kAuto, 64).threads, 6);  // capped at usable cores
  EXPECT_EQ(ParseCpuPolicy("performance"), CpuPolicy::kPerformance);
  EXPECT_FALSE(ParseCpuPolicy("fast").has_value());
}

TEST(CpuTopologyTest, CpuidCoreTypeIsConsistentWithTheMachine) {
  // On a non-hybrid CPU (every CI machine so far) leaf 0x1A reports nothing;
  // on a hybrid one every usable CPU has a type.
  const CpuTopology t = ReadCpuTopology("/", {}, true);
  if (t.core_type_source == "cpuid") {
    EXPECT_EQ(t.performance_cpus.size() + t.efficiency_cpus.size(), t.usable_cpus.size());
  } else if (t.core_type_source == "none") {
    EXPECT_FALSE(CpuidCoreType(t.usable_cpus.front()).has_value());
    EXPECT_FALSE(t.hybrid());
  }
}

TEST(CpuTopologyTest, ReadsMemoryInfo) {
  const std::string root = testing::TempDir();
  fs::create_directories(root + "/proc");
  testing::WriteFileOrDie(root + "/proc/meminfo",
                          "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n");
  const MemoryInfo m = ReadMemoryInfo(root);
  EXPECT_EQ(m.total_bytes, 24000000ull * 1024);
  EXPECT_EQ(m.available_bytes, 20000000ull * 1024);
  EXPECT_FALSE(m.cgroup_limit_bytes.has_value());
}

}  // namespace
}  // namespace dllm
