// Register-only int8 peak loops, one translation unit per ISA (each built
// with only its own flags): the denominators of every "% of peak" figure.
// Each runs on the calling thread for about `seconds` and returns int8
// ops/s (2 ops per multiply-add).
#ifndef DLLM_KERNELS_INT8_PEAK_H_
#define DLLM_KERNELS_INT8_PEAK_H_

namespace dllm {

// TDPBUSD on resident tiles: 4 independent 16x16 int32 accumulators,
// 2 * 16 * 16 * 64 ops per instruction. Needs AMX permission.
double AmxPeakOpsPerSecond(double seconds);
// VPDPBUSD zmm into 12 independent accumulators: 2 * 64 ops per instruction.
double Avx512VnniPeakOpsPerSecond(double seconds);
// AVX2 without VNNI: vpmaddubsw on ymm alone (2 * 32 ops per instruction),
// independent results: the multiply throughput, an upper bound for the
// kernel, which also accumulates, widens to int32 and scales in float.
double Avx2PeakOpsPerSecond(double seconds);

}  // namespace dllm

#endif  // DLLM_KERNELS_INT8_PEAK_H_
