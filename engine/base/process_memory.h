// This process's memory as the kernel accounts it (/proc/self/status):
// resident set split into anonymous and file-backed pages, and the peak.
#ifndef DLLM_ENGINE_BASE_PROCESS_MEMORY_H_
#define DLLM_ENGINE_BASE_PROCESS_MEMORY_H_

#include <cstdint>

namespace dllm {

struct ProcessMemory {
  uint64_t rss_bytes = 0;       // VmRSS
  uint64_t rss_anon_bytes = 0;  // RssAnon: heap, repacked weights, activations
  uint64_t rss_file_bytes = 0;  // RssFile: mapped model pages still resident
  uint64_t peak_rss_bytes = 0;  // VmHWM
  uint64_t virtual_bytes = 0;   // VmSize
};

// Zeros when /proc is unavailable.
ProcessMemory ReadProcessMemory();

}  // namespace dllm

#endif  // DLLM_ENGINE_BASE_PROCESS_MEMORY_H_
