// AMX int8 peak loop: tdpbusd into 4 resident C tiles from 2 A and 2 B
// tiles, no loads in the loop (built with -mamx-tile -mamx-int8; needs the
// tile-data permission). Tiles are named by immediates, so nothing can spill.
#include <immintrin.h>

#include <cstdint>

#include "kernels/amx_tile_config.h"
#include "kernels/peak_internal.h"

namespace dllm::peak_internal {
namespace {

constexpr AmxTileConfig MakeConfig() {
  AmxTileConfig c{};
  c.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}
// Static storage: GCC 12 may drop stores to a config built on the stack.
alignas(64) const AmxTileConfig kConfig = MakeConfig();
alignas(64) const uint8_t kOnes[1024] = {1};

}  // namespace

void AmxInt8Blocks(int64_t blocks) {
  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(&kConfig);
  _tile_loadd(4, kOnes, 64);
  _tile_loadd(5, kOnes, 64);
  _tile_loadd(6, kOnes, 64);
  _tile_loadd(7, kOnes, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < blocks; ++i) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  alignas(64) static int32_t out[256];
  _tile_stored(0, out, 64);
  _tile_release();
}

}  // namespace dllm::peak_internal
