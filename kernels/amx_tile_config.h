// The 64-byte operand of `ldtilecfg` (palette 1), shared by the AMX GEMM
// and the AMX peak loop. Keep configs in static storage: GCC 12 treats
// `_tile_loadconfig` as reading only 8 bytes, so a config filled on the
// stack just before the load can lose its stores (gemm_amx.cc).
#ifndef DLLM_KERNELS_AMX_TILE_CONFIG_H_
#define DLLM_KERNELS_AMX_TILE_CONFIG_H_

#include <cstdint>

namespace dllm {

struct alignas(64) AmxTileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row of tile t
  uint8_t rows[16];    // rows of tile t
};
static_assert(sizeof(AmxTileConfig) == 64);

}  // namespace dllm

#endif  // DLLM_KERNELS_AMX_TILE_CONFIG_H_
