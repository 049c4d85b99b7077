// Register-only int8 peak loops, one translation unit per ISA (each built
// with only its own flags): the denominators of gemm_bench's % of peak.
// Each runs on the calling thread for about `seconds` and returns int8
// ops/s (2 ops per multiply-add).
#ifndef DLLM_BENCH_KERNELS_PEAK_H_
#define DLLM_BENCH_KERNELS_PEAK_H_

namespace dllm::bench {

// TDPBUSD on resident tiles: 4 independent 16x16 int32 accumulators,
// 2 * 16 * 16 * 64 ops per instruction. Needs AMX permission.
double AmxPeakOpsPerSecond(double seconds);
// VPDPBUSD zmm into 12 independent accumulators: 2 * 64 ops per instruction.
double Avx512VnniPeakOpsPerSecond(double seconds);
// The AVX2 kernel's int8 step without VNNI, vpmaddubsw + vpmaddwd + vpaddd
// on ymm (2 * 32 ops per step), into 8 independent accumulators.
double Avx2PeakOpsPerSecond(double seconds);

}  // namespace dllm::bench

#endif  // DLLM_BENCH_KERNELS_PEAK_H_
