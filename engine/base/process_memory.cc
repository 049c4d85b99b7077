#include "engine/base/process_memory.h"

#include <cstdio>
#include <cstring>

namespace dllm {

ProcessMemory ReadProcessMemory() {
  ProcessMemory m;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return m;
  char line[256];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long long kb = 0;
    char key[64] = {};
    if (std::sscanf(line, "%63[^:]: %llu kB", key, &kb) != 2) continue;
    const uint64_t bytes = static_cast<uint64_t>(kb) * 1024;
    if (std::strcmp(key, "VmRSS") == 0) m.rss_bytes = bytes;
    if (std::strcmp(key, "RssAnon") == 0) m.rss_anon_bytes = bytes;
    if (std::strcmp(key, "RssFile") == 0) m.rss_file_bytes = bytes;
    if (std::strcmp(key, "VmHWM") == 0) m.peak_rss_bytes = bytes;
    if (std::strcmp(key, "VmSize") == 0) m.virtual_bytes = bytes;
  }
  std::fclose(f);
  return m;
}

}  // namespace dllm
