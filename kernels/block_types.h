// GGUF/ggml quantized block layouts, byte for byte as stored in the file.
// Each struct's size is checked against the type table (ggml_types.cc).
#ifndef DLLM_KERNELS_BLOCK_TYPES_H_
#define DLLM_KERNELS_BLOCK_TYPES_H_

#include <cstdint>

namespace dllm {

constexpr int kQK = 32;           // elements per block of the legacy formats
constexpr int kQKK = 256;         // elements per super-block of the K formats
constexpr int kKScaleBytes = 12;  // packed 6-bit scales/mins of Q4_K and Q5_K

using f16_bits = uint16_t;  // IEEE half, stored raw

struct BlockQ4_0 {
  f16_bits d;           // scale
  uint8_t qs[kQK / 2];  // nibbles: element j in low nibble of qs[j], j+16 in high
};
struct BlockQ4_1 {
  f16_bits d, m;  // scale, min
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
  f16_bits d;
  uint8_t qh[4];  // 5th bit of each element
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  f16_bits d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  f16_bits d;
  int8_t qs[kQK];
};
struct BlockQ4_K {
  f16_bits d, dmin;              // super-block scale for scales / mins
  uint8_t scales[kKScaleBytes];  // 8 x (6-bit scale, 6-bit min)
  uint8_t qs[kQKK / 2];
};
struct BlockQ5_K {
  f16_bits d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];      // low 4 bits
  uint8_t qh[kQKK / 4];      // high 2 bits
  int8_t scales[kQKK / 16];  // 16 x 8-bit scales
  f16_bits d;
};

static_assert(sizeof(BlockQ4_0) == 18, "wrong Q4_0 block size");
static_assert(sizeof(BlockQ4_1) == 20, "wrong Q4_1 block size");
static_assert(sizeof(BlockQ5_0) == 22, "wrong Q5_0 block size");
static_assert(sizeof(BlockQ5_1) == 24, "wrong Q5_1 block size");
static_assert(sizeof(BlockQ8_0) == 34, "wrong Q8_0 block size");
static_assert(sizeof(BlockQ4_K) == 144, "wrong Q4_K block size");
static_assert(sizeof(BlockQ5_K) == 176, "wrong Q5_K block size");
static_assert(sizeof(BlockQ6_K) == 210, "wrong Q6_K block size");

}  // namespace dllm

#endif  // DLLM_KERNELS_BLOCK_TYPES_H_
