// What cores this process may use: logical CPUs in its affinity mask,
// physical cores behind them, performance vs efficiency cores on hybrid
// CPUs (from sysfs `cpu_core`/`cpu_atom`), and the cgroup CPU quota. Reads
// a sysfs/procfs root that tests can point at a fake tree.
#ifndef DLLM_ENGINE_SCHEDULER_CPU_TOPOLOGY_H_
#define DLLM_ENGINE_SCHEDULER_CPU_TOPOLOGY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dllm {

struct CpuTopology {
  std::vector<int> usable_cpus;  // logical CPU ids in the affinity mask
  int physical_cores = 0;        // distinct (package, core) among usable CPUs
  std::vector<int> performance_cpus;  // from /sys/devices/cpu_core/cpus
  std::vector<int> efficiency_cpus;   // from /sys/devices/cpu_atom/cpus
  std::optional<double> cgroup_cpu_quota;  // cpu.max quota/period, e.g. 1.5
  std::string core_type_source;  // "sysfs" or "none"

  bool hybrid() const { return !performance_cpus.empty() && !efficiency_cpus.empty(); }
  // Threads worth running: physical cores, capped by the cgroup quota.
  int UsableThreads() const;
};

// Parses a Linux cpu list ("0-3,8,10-11").
std::vector<int> ParseCpuList(const std::string& text);

// Reads the topology under `root` ("/" in production), restricted to
// `affinity` (when empty: this process's sched_getaffinity mask).
CpuTopology ReadCpuTopology(const std::string& root = "/",
                            const std::vector<int>& affinity = {});

struct MemoryInfo {
  uint64_t total_bytes = 0;      // MemTotal
  uint64_t available_bytes = 0;  // MemAvailable
  std::optional<uint64_t> cgroup_limit_bytes;  // memory.max
};

MemoryInfo ReadMemoryInfo(const std::string& root = "/");

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_CPU_TOPOLOGY_H_
