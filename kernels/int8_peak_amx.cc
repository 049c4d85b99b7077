// AMX int8 peak: TDPBUSD on resident tiles (see int8_peak.h).
#include <immintrin.h>

#include <chrono>
#include <cstdint>

#include "kernels/int8_peak.h"

namespace dllm {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

constexpr TileConfig MakeConfig() {
  TileConfig c{};
  c.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}
// Static storage: GCC 12 may drop stores to a config built on the stack.
alignas(64) static const TileConfig kConfig = MakeConfig();

}  // namespace

double AmxPeakOpsPerSecond(double seconds) {
  alignas(64) static uint8_t src[1024] = {1};
  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(&kConfig);
  _tile_loadd(4, src, 64);
  _tile_loadd(5, src, 64);
  _tile_loadd(6, src, 64);
  _tile_loadd(7, src, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  constexpr int64_t kInner = 1 << 14;
  int64_t iters = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    for (int64_t i = 0; i < kInner; ++i) {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
    iters += kInner;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds);
  alignas(64) static int32_t out[256];
  _tile_stored(0, out, 64);
  _tile_release();
  return static_cast<double>(iters) * 4 * 2 * 16 * 16 * 64 / elapsed;
}

}  // namespace dllm
