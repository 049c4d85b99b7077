// The machine's streaming read bandwidth from memory: the figure a GEMM
// over few rows (weights read once, little arithmetic per byte) is judged
// against, in `dllm bench` and the kernel benchmarks.
#ifndef DLLM_ENGINE_PARALLEL_READ_BANDWIDTH_H_
#define DLLM_ENGINE_PARALLEL_READ_BANDWIDTH_H_

namespace dllm {

// Bytes/s read over a 384 MiB buffer (far larger than the caches) by
// `threads` threads, best of 3 passes. Takes about a second.
double MeasureReadBandwidth(int threads);

}  // namespace dllm

#endif  // DLLM_ENGINE_PARALLEL_READ_BANDWIDTH_H_
