// /proc/self readers behind ProcessCollector. Memory comes from
// engine/base/process_memory.h (/proc/self/status); thread count and start
// time from /proc/self/stat; CPU time from getrusage; descriptors from
// /proc/self/fd and RLIMIT_NOFILE.
#include "service/metrics/process_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "engine/base/process_memory.h"

namespace dllm {
namespace {

struct ProcStat {
  long threads = 0;
  unsigned long long start_ticks = 0;  // since boot, in clock ticks
};

// /proc/self/stat: the command name (field 2) may hold spaces and ')', so
// the numeric fields are counted from after the last ')'.
ProcStat ReadProcStat() {
  ProcStat s;
  std::FILE* f = std::fopen("/proc/self/stat", "r");
  if (f == nullptr) return s;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return s;
  ++p;
  // Field 3 (state) is the first token after ')'; num_threads is field 20
  // and starttime field 22.
  for (int field = 3; field <= 22 && *p != '\0'; ++field) {
    while (*p == ' ') ++p;
    char* end = nullptr;
    if (field == 20) s.threads = std::strtol(p, &end, 10);
    if (field == 22) s.start_ticks = std::strtoull(p, &end, 10);
    while (*p != ' ' && *p != '\0') ++p;
  }
  return s;
}

// Boot time in seconds since the epoch ("btime" in /proc/stat).
double ReadBootTime() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long btime = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "btime %llu", &btime) == 1) break;
  }
  std::fclose(f);
  return static_cast<double>(btime);
}

double CpuSeconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// Counts /proc/self/fd entries other than the directory's own descriptor.
double OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  const int own = dirfd(dir);
  double count = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    if (std::atoi(e->d_name) == own) continue;
    ++count;
  }
  closedir(dir);
  return count;
}

double MaxFds() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<double>(r.rlim_cur);
}

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type,
                                double value, std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return prometheus::MetricFamily{name, help, type, {std::move(m)}};
}

}  // namespace

ProcessCollector::ProcessCollector(std::string model_name) : model_name_(std::move(model_name)) {
  const long ticks = sysconf(_SC_CLK_TCK);
  const double boot = ReadBootTime();
  if (ticks > 0 && boot > 0) {
    start_time_seconds_ = boot + static_cast<double>(ReadProcStat().start_ticks) / ticks;
  }
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  const ProcessMemory mem = ReadProcessMemory();
  const ProcStat stat = ReadProcStat();
  const std::vector<prometheus::ClientMetric::Label> model = {{"model", model_name_}};
  return {
      Family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
             MetricType::Counter, CpuSeconds(), {}),
      Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, OpenFds(),
             {}),
      Family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
             MaxFds(), {}),
      Family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
             static_cast<double>(mem.virtual_bytes), {}),
      Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
             static_cast<double>(mem.rss_bytes), {}),
      Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
             MetricType::Gauge, start_time_seconds_, {}),
      Family("process_threads", "Number of OS threads in the process.", MetricType::Gauge,
             static_cast<double>(stat.threads), {}),
      Family("dllm_process_resident_anon_bytes",
             "Resident anonymous memory (RssAnon): heap, repacked weights, activations.",
             MetricType::Gauge, static_cast<double>(mem.rss_anon_bytes), model),
      Family("dllm_process_resident_file_bytes",
             "Resident file-backed memory (RssFile): mapped model pages in RAM.", MetricType::Gauge,
             static_cast<double>(mem.rss_file_bytes), model),
      Family("dllm_process_resident_peak_bytes", "Peak resident set size (VmHWM).",
             MetricType::Gauge, static_cast<double>(mem.peak_rss_bytes), model),
  };
}

}  // namespace dllm
