// Test-only stand-in for <immintrin.h>: lets gemm_emulated_test compile the
// AVX-VNNI, AVX-512 VNNI and AMX kernel sources for a CPU without those ISAs. AVX-512
// intrinsics come from SIMDe (Debian libsimde-dev) under their native names;
// AMX tile instructions are emulated below, checking tile shapes the way the
// hardware does (a shape mismatch aborts, as #UD would). Found first through
// an -I path given only to those two sources.
#ifndef DLLM_TESTS_KERNELS_EMU_IMMINTRIN_H_
#define DLLM_TESTS_KERNELS_EMU_IMMINTRIN_H_

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// What SIMDe 0.7.4 lacks among the intrinsics the kernels use.
#define _mm256_dpbusd_avx_epi32(src, a, b) simde_mm256_dpbusd_epi32(src, a, b)
typedef simde__mmask16 __mmask16;
inline simde__m512 _mm512_cvtepi32_ps(simde__m512i a) {
  int32_t in[16];
  float out[16];
  std::memcpy(in, &a, 64);
  for (int i = 0; i < 16; ++i) out[i] = static_cast<float>(in[i]);
  simde__m512 r;
  std::memcpy(&r, out, 64);
  return r;
}
inline simde__m512i _mm512_cvtepu8_epi32(simde__m128i a) {
  uint8_t in[16];
  int32_t out[16];
  std::memcpy(in, &a, 16);
  for (int i = 0; i < 16; ++i) out[i] = in[i];
  simde__m512i r;
  std::memcpy(&r, out, 64);
  return r;
}
inline void _mm512_mask_storeu_ps(void* p, __mmask16 k, simde__m512 a) {
  float v[16];
  std::memcpy(v, &a, 64);
  for (int i = 0; i < 16; ++i) {
    if ((k >> i) & 1) static_cast<float*>(p)[i] = v[i];
  }
}

namespace dllm_amx_emu {

struct State {
  bool configured = false;
  uint8_t rows[8] = {};
  uint16_t colsb[8] = {};
  alignas(64) uint8_t t[8][1024] = {};
};
inline State& St() {
  static thread_local State s;
  return s;
}
inline void Die(const char* what) {
  std::fprintf(stderr, "AMX emulation: %s\n", what);
  std::abort();
}
inline void LoadConfig(const void* cfg) {
  const auto* p = static_cast<const uint8_t*>(cfg);
  if (p[0] != 1) Die("palette must be 1");
  State& s = St();
  for (int i = 0; i < 8; ++i) {
    s.colsb[i] = static_cast<uint16_t>(p[16 + 2 * i] | (p[17 + 2 * i] << 8));
    s.rows[i] = p[48 + i];
    if (s.colsb[i] > 64 || s.rows[i] > 16) Die("tile larger than 16 x 64");
  }
  s.configured = true;
}
inline void Check(int t) {
  if (!St().configured) Die("tile used before _tile_loadconfig");
  if (St().rows[t] == 0 || St().colsb[t] == 0) Die("tile not configured");
}
inline void LoadD(int t, const void* base, long stride) {
  Check(t);
  State& s = St();
  for (int r = 0; r < s.rows[t]; ++r) {
    std::memcpy(s.t[t] + 64 * r, static_cast<const uint8_t*>(base) + r * stride, s.colsb[t]);
  }
}
inline void StoreD(int t, void* base, long stride) {
  Check(t);
  State& s = St();
  for (int r = 0; r < s.rows[t]; ++r) {
    std::memcpy(static_cast<uint8_t*>(base) + r * stride, s.t[t] + 64 * r, s.colsb[t]);
  }
}
inline void Zero(int t) {
  Check(t);
  std::memset(St().t[t], 0, 1024);
}
template <bool kASigned, bool kBSigned>
void Dp(int c, int a, int b) {
  Check(c), Check(a), Check(b);
  State& s = St();
  const int m = s.rows[c], n = s.colsb[c] / 4, k = s.colsb[a] / 4;
  if (s.rows[a] != m || s.rows[b] != k || s.colsb[b] != s.colsb[c]) Die("tdp shape mismatch");
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      int32_t acc;
      std::memcpy(&acc, s.t[c] + 64 * i + 4 * j, 4);
      for (int kk = 0; kk < k; ++kk) {
        for (int e = 0; e < 4; ++e) {
          const uint8_t av = s.t[a][64 * i + 4 * kk + e], bv = s.t[b][64 * kk + 4 * j + e];
          acc +=
              (kASigned ? static_cast<int8_t>(av) : av) * (kBSigned ? static_cast<int8_t>(bv) : bv);
        }
      }
      std::memcpy(s.t[c] + 64 * i + 4 * j, &acc, 4);
    }
  }
}

}  // namespace dllm_amx_emu

#define _tile_loadconfig(p) dllm_amx_emu::LoadConfig(p)
#define _tile_loadd(t, base, stride) dllm_amx_emu::LoadD(t, base, static_cast<long>(stride))
#define _tile_stored(t, base, stride) dllm_amx_emu::StoreD(t, base, static_cast<long>(stride))
#define _tile_zero(t) dllm_amx_emu::Zero(t)
#define _tile_dpbsud(c, a, b) dllm_amx_emu::Dp<true, false>(c, a, b)
#define _tile_dpbssd(c, a, b) dllm_amx_emu::Dp<true, true>(c, a, b)
#define _tile_dpbusd(c, a, b) dllm_amx_emu::Dp<false, true>(c, a, b)
#define _tile_release() ((void)0)

#endif  // DLLM_TESTS_KERNELS_EMU_IMMINTRIN_H_
