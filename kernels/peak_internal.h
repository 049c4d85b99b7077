// The ISA translation units behind peak.h: each function runs `blocks`
// blocks of its loop on the calling thread.
#ifndef DLLM_KERNELS_PEAK_INTERNAL_H_
#define DLLM_KERNELS_PEAK_INTERNAL_H_

#include <cstdint>

namespace dllm::peak_internal {

// Instructions per block.
inline constexpr int kAvx2Int8PerBlock = 16;
inline constexpr int kYmmChainsPerBlock = 15;  // AVX-VNNI and AVX2 FP32
inline constexpr int kZmmChainsPerBlock = 16;  // AVX-512 VNNI and FP32
inline constexpr int kAmxPerBlock = 4;         // tdpbusd into 4 tiles
inline constexpr int kAddsPerBlock = 16;       // the clock loop's dependent adds

void Avx2Int8Blocks(int64_t blocks);
void AvxVnniInt8Blocks(int64_t blocks);
void Avx2Fp32Blocks(int64_t blocks);
void Avx512VnniInt8Blocks(int64_t blocks);
void Avx512Fp32Blocks(int64_t blocks);
void AmxInt8Blocks(int64_t blocks);
void DependentAddBlocks(int64_t blocks);

}  // namespace dllm::peak_internal

#endif  // DLLM_KERNELS_PEAK_INTERNAL_H_
