// What cores this process may use: logical CPUs in its affinity mask,
// physical cores behind them, performance vs efficiency cores on hybrid
// CPUs (from sysfs `cpu_core`/`cpu_atom`), and the cgroup CPU quota. Reads
// a sysfs/procfs root that tests can point at a fake tree.
#ifndef DLLM_ENGINE_PARALLEL_CPU_TOPOLOGY_H_
#define DLLM_ENGINE_PARALLEL_CPU_TOPOLOGY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dllm {

// Which cores the engine's threads may run on (`--cpu-policy`).
enum class CpuPolicy {
  kAuto,         // every usable physical core; tiles are handed out
                 // dynamically, so slower cores simply take fewer
  kPerformance,  // performance cores only (hybrid CPUs); same as kAll elsewhere
  kAll,          // every usable physical core
};
const char* CpuPolicyName(CpuPolicy policy);
std::optional<CpuPolicy> ParseCpuPolicy(const std::string& name);

struct CpuTopology {
  std::vector<int> usable_cpus;            // logical CPU ids in the affinity mask
  int physical_cores = 0;                  // distinct (package, core) among usable CPUs
  std::vector<int> performance_cpus;       // from /sys/devices/cpu_core/cpus
  std::vector<int> efficiency_cpus;        // from /sys/devices/cpu_atom/cpus
  std::optional<double> cgroup_cpu_quota;  // cpu.max quota/period, e.g. 1.5
  // Who reported core types: "sysfs", "cpuid", "tbbbind" (oneTBB sees more
  // than one type; lists from sysfs/cpuid when they exist, e.g.
  // "tbbbind+sysfs") or "none".
  std::string core_type_source;

  bool hybrid() const { return !performance_cpus.empty() && !efficiency_cpus.empty(); }
  // Threads worth running: physical cores, capped by the cgroup quota.
  int UsableThreads() const;
};

// How many worker threads to run and where.
struct ThreadPlan {
  int threads = 1;
  bool performance_cores_only = false;
  std::string why;  // one line for logs and `dllm doctor`
};

// `requested` > 0 overrides the count (still capped at usable threads
// for the chosen cores); 0 picks it from the topology.
ThreadPlan PlanThreads(const CpuTopology& topology, CpuPolicy policy, int requested);

// Parses a Linux cpu list ("0-3,8,10-11").
std::vector<int> ParseCpuList(const std::string& text);

// Reads the topology under `root` ("/" in production), restricted to
// `affinity` (when empty: this process's sched_getaffinity mask). Core
// types come from sysfs (`/sys/devices/cpu_core|cpu_atom/cpus`); with
// `probe_cpuid` and no sysfs answer, from CPUID leaf 0x1A on each CPU.
CpuTopology ReadCpuTopology(const std::string& root = "/", const std::vector<int>& affinity = {},
                            bool probe_cpuid = true);

// Core type of `cpu` from CPUID leaf 0x1A (run pinned to it): 0x40 =
// performance ("Core"), 0x20 = efficiency ("Atom"), nullopt when the CPU
// does not report hybrid types.
std::optional<int> CpuidCoreType(int cpu);

struct MemoryInfo {
  uint64_t total_bytes = 0;                    // MemTotal
  uint64_t available_bytes = 0;                // MemAvailable
  std::optional<uint64_t> cgroup_limit_bytes;  // memory.max
};

MemoryInfo ReadMemoryInfo(const std::string& root = "/");

}  // namespace dllm

#endif  // DLLM_ENGINE_PARALLEL_CPU_TOPOLOGY_H_
