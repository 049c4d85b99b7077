#include "engine/parallel/cpu_topology.h"

#include <cpuid.h>
#include <sched.h>
#include <tbb/info.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace dllm {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Join(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return root + path;
}

std::vector<int> ProcessAffinity() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

std::optional<double> ReadCgroupQuota(const std::string& root) {
  // cgroup v2: "max 100000" or "150000 100000".
  if (auto text = ReadFile(Join(root, "/sys/fs/cgroup/cpu.max"))) {
    std::vector<std::string> parts = absl::StrSplit(absl::StripAsciiWhitespace(*text), ' ');
    double quota = 0, period = 0;
    if (parts.size() == 2 && parts[0] != "max" && absl::SimpleAtod(parts[0], &quota) &&
        absl::SimpleAtod(parts[1], &period) && quota > 0 && period > 0) {
      return quota / period;
    }
  }
  return std::nullopt;
}

}  // namespace

const char* CpuPolicyName(CpuPolicy policy) {
  switch (policy) {
    case CpuPolicy::kAuto:
      return "auto";
    case CpuPolicy::kPerformance:
      return "performance";
    case CpuPolicy::kAll:
      return "all";
  }
  return "auto";
}

std::optional<CpuPolicy> ParseCpuPolicy(const std::string& name) {
  if (name == "auto") return CpuPolicy::kAuto;
  if (name == "performance") return CpuPolicy::kPerformance;
  if (name == "all") return CpuPolicy::kAll;
  return std::nullopt;
}

std::optional<int> CpuidCoreType(int cpu) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 0x1A) return std::nullopt;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  if (!((edx >> 15) & 1u)) return std::nullopt;  // CPUID.7.0:EDX[15] = hybrid part
  cpu_set_t old_set, one;
  CPU_ZERO(&old_set);
  CPU_ZERO(&one);
  if (sched_getaffinity(0, sizeof(old_set), &old_set) != 0) return std::nullopt;
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) return std::nullopt;
  __cpuid_count(0x1A, 0, eax, ebx, ecx, edx);
  sched_setaffinity(0, sizeof(old_set), &old_set);
  const int type = static_cast<int>(eax >> 24);
  if (type == 0) return std::nullopt;
  return type;
}

ThreadPlan PlanThreads(const CpuTopology& t, CpuPolicy policy, int requested) {
  ThreadPlan plan;
  int available = t.UsableThreads();
  if (policy == CpuPolicy::kPerformance && t.hybrid()) {
    // Performance cores usually run 2 hardware threads per core.
    std::set<int> p(t.performance_cpus.begin(), t.performance_cpus.end());
    const int p_logical = static_cast<int>(p.size());
    const int p_cores = std::max(
        1, p_logical * t.physical_cores / std::max<int>(1, static_cast<int>(t.usable_cpus.size())));
    available = std::min(available, p_cores);
    plan.performance_cores_only = true;
  }
  plan.threads = std::max(1, requested > 0 ? std::min(requested, available) : available);
  plan.why = std::string(CpuPolicyName(policy)) + ": " + std::to_string(plan.threads) + " threads" +
             (plan.performance_cores_only ? " on performance cores" : "") +
             (t.hybrid() ? " (hybrid CPU, tiles handed out dynamically)" : "");
  return plan;
}

std::vector<int> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  for (absl::string_view part : absl::StrSplit(absl::StripAsciiWhitespace(text), ',')) {
    if (part.empty()) continue;
    std::pair<std::string, std::string> range = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(range.first, &lo)) continue;
    hi = lo;
    if (!range.second.empty() && !absl::SimpleAtoi(range.second, &hi)) continue;
    for (int c = lo; c <= hi && c - lo < 65536; ++c) cpus.push_back(c);
  }
  return cpus;
}

CpuTopology ReadCpuTopology(const std::string& root, const std::vector<int>& affinity,
                            bool probe_cpuid) {
  CpuTopology topo;
  topo.usable_cpus = affinity.empty() ? ProcessAffinity() : affinity;
  const std::set<int> usable(topo.usable_cpus.begin(), topo.usable_cpus.end());

  std::set<std::pair<int, int>> cores;
  for (int cpu : topo.usable_cpus) {
    const std::string dir = Join(root, "/sys/devices/system/cpu/cpu" + std::to_string(cpu));
    int pkg = 0, core = cpu;
    if (auto t = ReadFile(dir + "/topology/physical_package_id")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*t), &pkg);
    }
    if (auto t = ReadFile(dir + "/topology/core_id")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*t), &core);
    }
    cores.emplace(pkg, core);
  }
  topo.physical_cores = std::max<int>(1, static_cast<int>(cores.size()));

  auto filtered = [&usable](const std::vector<int>& cpus) {
    std::vector<int> out;
    for (int c : cpus) {
      if (usable.count(c)) out.push_back(c);
    }
    return out;
  };
  topo.core_type_source = "none";
  if (auto p = ReadFile(Join(root, "/sys/devices/cpu_core/cpus"))) {
    topo.performance_cpus = filtered(ParseCpuList(*p));
    topo.core_type_source = "sysfs";
  }
  if (auto e = ReadFile(Join(root, "/sys/devices/cpu_atom/cpus"))) {
    topo.efficiency_cpus = filtered(ParseCpuList(*e));
    topo.core_type_source = "sysfs";
  }
  // oneTBB (through tbbbind/hwloc) knows the core types even where sysfs
  // has no cpu_core/cpu_atom folders; the arena constraint uses it.
  const bool tbb_hybrid = root == "/" && tbb::info::core_types().size() > 1;
  if (topo.core_type_source == "none" && probe_cpuid) {
    for (int cpu : topo.usable_cpus) {
      const std::optional<int> type = CpuidCoreType(cpu);
      if (!type) break;
      (*type == 0x20 ? topo.efficiency_cpus : topo.performance_cpus).push_back(cpu);
      topo.core_type_source = "cpuid";
    }
  }
  if (tbb_hybrid) {
    topo.core_type_source =
        topo.core_type_source == "none" ? "tbbbind" : "tbbbind+" + topo.core_type_source;
  }
  topo.cgroup_cpu_quota = ReadCgroupQuota(root);
  return topo;
}

int CpuTopology::UsableThreads() const {
  int threads = physical_cores;
  if (cgroup_cpu_quota) {
    threads = std::min(threads, std::max(1, static_cast<int>(std::ceil(*cgroup_cpu_quota))));
  }
  return std::max(1, threads);
}

MemoryInfo ReadMemoryInfo(const std::string& root) {
  MemoryInfo info;
  if (auto text = ReadFile(Join(root, "/proc/meminfo"))) {
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      uint64_t kb = 0;
      if (f.size() < 2 || !absl::SimpleAtoi(f[1], &kb)) continue;
      if (f[0] == "MemTotal:") info.total_bytes = kb * 1024;
      if (f[0] == "MemAvailable:") info.available_bytes = kb * 1024;
    }
  }
  if (auto text = ReadFile(Join(root, "/sys/fs/cgroup/memory.max"))) {
    uint64_t limit = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &limit))
      info.cgroup_limit_bytes = limit;
  }
  return info;
}

}  // namespace dllm
