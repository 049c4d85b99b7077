// AVX2 GEMM tiles (compiled with -mavx2 -mfma only). A 16-row weight panel
// is two 8-lane halves; the register tile is 4 X rows by one panel: 8 int32
// chains, each weight vector used by 4 rows. The walk over K, the
// prefetching and the offset folding are the shared tile driver's
// (gemm_tile_driver-inl.h). With 16 ymm registers the float sums cannot
// stay in registers beside the int32 ones: each group's epilogue reads and
// writes them in `part` (L1), t = cvt(dot) * d, y += t * s_x.
//
// Integer scheme: `vpmaddubsw` multiplies u8 codes by s8 activations into
// saturating int16 pairs, `vpmaddwd` by ones widens to int32. Codes of at
// most 6 bits cannot saturate (2 * 63 * 127 < 32767; two 4-bit products are
// summed in int16 before widening: 4 * 15 * 127 < 32767). 8-bit codes could
// (2 * 255 * 127), so they are recentred, s = u - 128, and multiplied as
// |s| x sign(x, s) (at most 2 * 128 * 127): the integer dot is then
// dot(u, q) - 128 sum(q), which CodeBias tells the driver (a free offset
// becomes c + 128 d) and the folded offset accounts for. Activations are in
// [-127, 127], so negating them never overflows.
//
// The same source is compiled a second time as gemm_avxvnni.cc with
// DLLM_GEMM_AVXVNNI defined (and -mavxvnni): there `vpdpbusd` (ymm) takes the
// u8 codes times s8 activations straight into int32, with no saturation and
// no recentring, and gemm.cc uses that table for IsaLevel::kAvx2 on CPUs with
// AVX-VNNI.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {
namespace {

#ifdef DLLM_GEMM_AVXVNNI
constexpr bool kAvxVnni = true;
#define DLLM_GEMM_AVX2_FILL FillAvxVnniKernels
#else
constexpr bool kAvxVnni = false;
#define DLLM_GEMM_AVX2_FILL FillAvx2Kernels
#endif

inline __m256i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Quad-row q (0..3) of a 6-bit group (layout in quantized_matrix.h), bytes
// [half, half + 32) of it. The 16-bit shifts are safe: the masks drop the
// bits that cross a byte.
inline __m256i Unpack6(const uint8_t* codes, int q, int half) {
  auto load = [&](int v) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * v + half));
  };
  if (q < 2) return _mm256_and_si256(load(q), _mm256_set1_epi8(0x3f));
  const __m256i low = load(2);
  const __m256i lo =
      _mm256_and_si256(q == 2 ? low : _mm256_srli_epi16(low, 4), _mm256_set1_epi8(0x0f));
  return _mm256_or_si256(
      lo, _mm256_and_si256(_mm256_srli_epi16(load(q - 2), 2), _mm256_set1_epi8(0x30)));
}

// acc += the int32 dot of each lane's 4 codes `w` with the 4 activations `x`.
inline __m256i Dot4(__m256i acc, __m256i w, __m256i x) {
#ifdef DLLM_GEMM_AVXVNNI
  return _mm256_dpbusd_avx_epi32(acc, w, x);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
#endif
}

#include "kernels/gemm_tile_driver-inl.h"

struct Avx2 {
  static constexpr int kRowBlock = 4;
  static constexpr int kPanelBlock = 1;
  static constexpr float CodeBias(PackKind kind) {
    return !kAvxVnni && PackCodeBits(kind) == 8 ? 128.0f : 0.0f;
  }
  template <PackKind kKind, bool kIntOffset, int R, int P>
  static void BlockChunk(const GemmArgs& a, const int64_t* rows, int64_t p0, int64_t g0, int64_t g1,
                         const ChunkScales<Avx2>& cs, int shift, float* part);
};

// The integer dot of one scale group for R rows, both halves of the panel,
// started at init[r].
template <PackKind kKind, int R>
inline void GroupDots(const uint8_t* codes, const int8_t* const* x, const __m256i* init,
                      __m256i (&dot)[R][2]) {
  for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = init[r];
  if constexpr (PackIsFourBit(kKind)) {
    const __m256i nib = _mm256_set1_epi8(0x0f);
    for (int q = 0; q < 4; ++q) {
      for (int h = 0; h < 2; ++h) {
        const __m256i v =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * q + 32 * h));
        const __m256i lo = _mm256_and_si256(v, nib);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
        for (int r = 0; r < R; ++r) {
          const __m256i xl = Bcast4(x[r] + 4 * q), xh = Bcast4(x[r] + 16 + 4 * q);
          if constexpr (kAvxVnni) {
            dot[r][h] = Dot4(Dot4(dot[r][h], lo, xl), hi, xh);
          } else {  // both products in int16 first: 4 * 15 * 127 < 32767
            const __m256i p16 =
                _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
            dot[r][h] = _mm256_add_epi32(dot[r][h], _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
          }
        }
      }
    }
  } else if constexpr (kKind == PackKind::kU6G16) {
    for (int q = 0; q < 4; ++q) {
      const __m256i w0 = Unpack6(codes, q, 0), w1 = Unpack6(codes, q, 32);
      for (int r = 0; r < R; ++r) {
        const __m256i xb = Bcast4(x[r] + 4 * q);
        dot[r][0] = Dot4(dot[r][0], w0, xb);
        dot[r][1] = Dot4(dot[r][1], w1, xb);
      }
    }
  } else {
    for (int q = 0; q < 8; ++q) {
      for (int h = 0; h < 2; ++h) {
        const __m256i v =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * q + 32 * h));
        if constexpr (kAvxVnni) {
          for (int r = 0; r < R; ++r) dot[r][h] = Dot4(dot[r][h], v, Bcast4(x[r] + 4 * q));
        } else {  // recentred: |u - 128| x sign(x, u - 128)
          const __m256i s = _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));
          const __m256i mag = _mm256_abs_epi8(s);
          for (int r = 0; r < R; ++r) {
            dot[r][h] = Dot4(dot[r][h], mag, _mm256_sign_epi8(Bcast4(x[r] + 4 * q), s));
          }
        }
      }
    }
  }
}

template <PackKind kKind, bool kIntOffset, int R, int P>
void Avx2::BlockChunk(const GemmArgs& a, const int64_t* rows, int64_t p0, int64_t g0, int64_t g1,
                      const ChunkScales<Avx2>& cs, int shift, float* part) {
  static_assert(P == 1, "one panel a block");
  constexpr int S = PackGroupSize(kKind);
  constexpr int32_t kBias = static_cast<int32_t>(CodeBias(kKind));
  const QuantizedMatrix& w = *a.w;
  const int8_t* xq[R];
  const float* sx[R];
  const int32_t* sum16[R];
  for (int r = 0; r < R; ++r) {
    xq[r] = a.x->row_q(rows[r]);
    sx[r] = a.x->row_scale(rows[r]);
    sum16[r] = a.x->row_sum16(rows[r]);
  }
  const uint8_t* panel = w.panel(p0);
  const size_t gbytes = w.group_code_bytes();
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t k0 = g * S;
    const int8_t* x[R];
    __m256i init[R];
    for (int r = 0; r < R; ++r) {
      x[r] = xq[r] + k0;
      if constexpr (kIntOffset) {  // the dot has -kBias sum(q) already
        init[r] = _mm256_set1_epi32(ActGroupSum(sum16[r], k0, S) * (kBias - (1 << shift)));
      } else {
        init[r] = _mm256_setzero_si256();
      }
    }
    __m256i dot[R][2];
    GroupDots<kKind, R>(panel + g * gbytes, x, init, dot);
    const __m256 d0 = _mm256_load_ps(cs.d[0][g - g0]), d1 = _mm256_load_ps(cs.d[0][g - g0] + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 sv = _mm256_set1_ps(sx[r][k0 / kActBlock]);
      float* y = part + r * kPanelRows;
      const __m256 t0 = _mm256_mul_ps(_mm256_cvtepi32_ps(dot[r][0]), d0);
      const __m256 t1 = _mm256_mul_ps(_mm256_cvtepi32_ps(dot[r][1]), d1);
      _mm256_store_ps(y, _mm256_fmadd_ps(t0, sv, _mm256_load_ps(y)));
      _mm256_store_ps(y + 8, _mm256_fmadd_ps(t1, sv, _mm256_load_ps(y + 8)));
    }
  }
  if constexpr (!kIntOffset) {
    // The free mins, c * s_x sum(q), for the chunk's groups after its dots.
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t k0 = g * S;
      const __m256 c0 = _mm256_load_ps(cs.c[0][g - g0]), c1 = _mm256_load_ps(cs.c[0][g - g0] + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 xs = _mm256_set1_ps(sx[r][k0 / kActBlock] *
                                         static_cast<float>(ActGroupSum(sum16[r], k0, S)));
        float* y = part + r * kPanelRows;
        _mm256_store_ps(y, _mm256_fmadd_ps(c0, xs, _mm256_load_ps(y)));
        _mm256_store_ps(y + 8, _mm256_fmadd_ps(c1, xs, _mm256_load_ps(y + 8)));
      }
    }
  }
}

}  // namespace

void DLLM_GEMM_AVX2_FILL(GemmKernels* k) { FillTiles<Avx2>(k); }

}  // namespace dllm::gemm_internal
