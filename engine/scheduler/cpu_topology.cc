#include "absl/strings/string_view.h"
#include "engine/scheduler/cpu_topology.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

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

CpuTopology ReadCpuTopology(const std::string& root, const std::vector<int>& affinity) {
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
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &limit)) info.cgroup_limit_bytes = limit;
  }
  return info;
}

}  // namespace dllm
