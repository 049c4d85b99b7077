// The AVX2 activation quantizer: the scalar one's arithmetic, eight lanes at
// a time, so its codes, scales and sums are the same bits (for finite
// inputs): the same max|x|, the same s and 127 / max|x| in float, products
// rounded to nearest even (vcvtps2dq under the default MXCSR, as
// std::nearbyint), the same clamp.
#include <immintrin.h>

#include "kernels/quantize_act.h"

namespace dllm {
namespace {

int32_t HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void QuantizeRowAvx2(const float* x, int64_t cols, int8_t* q, float* scale, int32_t* sum16) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  // packs_epi32 then packs_epi16 leave the 4-byte groups of the four
  // vectors interleaved by 128-bit lane; this puts them back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < cols / kActBlock; ++b) {
    const float* xb = x + b * kActBlock;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
    const __m256 m =
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    const float amax = _mm_cvtss_f32(h);
    const float s = amax / 127.0f;
    const float inv = s > 0.0f ? 127.0f / amax : 0.0f;
    scale[b] = s;
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i c[4];
    for (int i = 0; i < 4; ++i) {
      c[i] =
          _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], vinv)), lo), hi);
    }
    sum16[2 * b] = HorizontalSum(_mm256_add_epi32(c[0], c[1]));
    sum16[2 * b + 1] = HorizontalSum(_mm256_add_epi32(c[2], c[3]));
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kActBlock),
                        _mm256_permutevar8x32_epi32(bytes, order));
  }
}

}  // namespace dllm
