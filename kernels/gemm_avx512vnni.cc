// AVX-512 VNNI GEMM tiles (compiled with -mavx512f/bw/vl/vnni only).
//
// A zmm holds one quad-row of a packed panel: 16 weight rows x 4 consecutive
// k codes, exactly `vpdpbusd`'s operand shape, so one instruction does
// 16 x 4 u8 x s8 products per X row into 16 int32 lanes. Codes are the
// unsigned operand and activations the signed one (quantized_matrix.h).
//
// Register tile, chosen by measurement on Zen 5 (`vpdpbusd zmm` has latency
// 4 and throughput 2 per cycle, and shares its two pipes with every float
// multiply and FMA): 4 X rows by 3 panels, 12 independent int32 chains, each
// weight vector used by 4 rows and each activation broadcast by 3 panels;
// nothing spills in the loops. The walk over K, the prefetching and the
// offset folding are the shared tile driver's (gemm_tile_driver-inl.h).
// Per group, row and panel the epilogue is t = cvt(dot) * d, y += t * s_x:
// two of the pipes' operations (three with free mins) against 8 (4-bit,
// 8-bit) or 4 (6-bit) `vpdpbusd`.
// GCC 12 flags `_mm512_undefined_ps()` inside `_mm512_cvtepi32_ps` as
// maybe-uninitialized once inlined; it is a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {
namespace {

inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

#include "kernels/gemm_avx512_helpers-inl.h"
#include "kernels/gemm_tile_driver-inl.h"

// The integer dot of one scale group for R rows x P panels, started at
// `init[r]` (the folded offset correction, or zero).
template <PackKind kKind, int R, int P>
inline void GroupDots(const uint8_t* const* codes, const int8_t* const* x, const __m512i* init,
                      __m512i (&dot)[R][P]) {
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) dot[r][p] = init[r];
  if constexpr (PackIsFourBit(kKind)) {
    const __m512i nib = _mm512_set1_epi8(0x0f);
    for (int q = 0; q < 4; ++q) {
      for (int half = 0; half < 2; ++half) {  // elements 4q.. (low nibbles), 16 + 4q.. (high)
        __m512i wv[P];  // loaded twice (from L1) rather than held: registers are short
        for (int p = 0; p < P; ++p) {
          const __m512i v = _mm512_load_si512(codes[p] + 64 * q);
          wv[p] = _mm512_and_si512(half == 0 ? v : _mm512_srli_epi16(v, 4), nib);
        }
        for (int r = 0; r < R; ++r) {
          const __m512i b = Bcast4(x[r] + 4 * q + 16 * half);
          for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], b);
        }
      }
    }
  } else if constexpr (kKind == PackKind::kU6G16) {
    for (int q = 0; q < 4; ++q) {
      __m512i wv[P];
      for (int p = 0; p < P; ++p) wv[p] = Unpack6(codes[p], q);
      for (int r = 0; r < R; ++r) {
        const __m512i b = Bcast4(x[r] + 4 * q);
        for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], b);
      }
    }
  } else {
    for (int q = 0; q < 8; ++q) {
      __m512i wv[P];
      for (int p = 0; p < P; ++p) wv[p] = _mm512_load_si512(codes[p] + 64 * q);
      for (int r = 0; r < R; ++r) {
        const __m512i b = Bcast4(x[r] + 4 * q);
        for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], b);
      }
    }
  }
}

struct Avx512Vnni {
  static constexpr int kRowBlock = 4;
  static constexpr int kPanelBlock = 3;
  static constexpr float CodeBias(PackKind) { return 0.0f; }
  template <PackKind kKind, bool kIntOffset, int R, int P>
  static void BlockChunk(const GemmArgs& a, const int64_t* rows, int64_t p0, int64_t g0, int64_t g1,
                         const ChunkScales<Avx512Vnni>& cs, int shift, float* part);
};

// Adds groups [g0, g1) (one chunk) of rows rows[0..R) x panels p0..p0+P to
// the partial sums `part` (row r at part + r * kPanelBlock * 16).
template <PackKind kKind, bool kIntOffset, int R, int P>
void Avx512Vnni::BlockChunk(const GemmArgs& a, const int64_t* rows, int64_t p0, int64_t g0,
                            int64_t g1, const ChunkScales<Avx512Vnni>& cs, int shift, float* part) {
  constexpr int S = PackGroupSize(kKind);
  const QuantizedMatrix& w = *a.w;
  const int8_t* xq[R];
  const float* sx[R];
  const int32_t* sum16[R];
  for (int r = 0; r < R; ++r) {
    xq[r] = a.x->row_q(rows[r]);
    sx[r] = a.x->row_scale(rows[r]);
    sum16[r] = a.x->row_sum16(rows[r]);
  }
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_load_ps(part + r * kPanelBlock * 16 + p * 16);
  const uint8_t* panel_base[P];
  for (int p = 0; p < P; ++p) panel_base[p] = w.panel(p0 + p);
  const size_t gbytes = w.group_code_bytes();
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t k0 = g * S;
    const uint8_t* codes[P];
    for (int p = 0; p < P; ++p) codes[p] = panel_base[p] + g * gbytes;
    const int8_t* x[R];
    __m512i init[R];
    for (int r = 0; r < R; ++r) {
      x[r] = xq[r] + k0;
      if constexpr (kIntOffset) {
        const int32_t sum = ActGroupSum(sum16[r], k0, S);
        init[r] = _mm512_set1_epi32(-(sum * (1 << shift)));
      } else {
        init[r] = _mm512_setzero_si512();
      }
    }
    __m512i dot[R][P];
    GroupDots<kKind, R, P>(codes, x, init, dot);
    for (int r = 0; r < R; ++r) {
      const __m512 sv = _mm512_set1_ps(sx[r][k0 / kActBlock]);
      for (int p = 0; p < P; ++p) {
        const __m512 t =
            _mm512_mul_ps(_mm512_cvtepi32_ps(dot[r][p]), _mm512_load_ps(cs.d[p][g - g0]));
        acc[r][p] = _mm512_fmadd_ps(t, sv, acc[r][p]);
      }
    }
  }
  if constexpr (!kIntOffset) {
    // The free mins, c * s_x sum(q), for the chunk's groups after its dots:
    // the same float operations in the same order for every tile shape.
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t k0 = g * S;
      for (int r = 0; r < R; ++r) {
        const __m512 xs = _mm512_set1_ps(sx[r][k0 / kActBlock] *
                                         static_cast<float>(ActGroupSum(sum16[r], k0, S)));
        for (int p = 0; p < P; ++p) {
          acc[r][p] = _mm512_fmadd_ps(_mm512_load_ps(cs.c[p][g - g0]), xs, acc[r][p]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) _mm512_store_ps(part + r * kPanelBlock * 16 + p * 16, acc[r][p]);
}

}  // namespace

void FillAvx512VnniKernels(GemmKernels* k) { FillTiles<Avx512Vnni>(k); }

}  // namespace dllm::gemm_internal
