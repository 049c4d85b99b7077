// AVX-512 helpers shared by the AVX-512-VNNI and AMX GEMM translation units
// (both compiled with AVX-512): unpacking 6-bit codes and forming Q4_K group
// scales. Include only from those files, inside their anonymous namespace,
// after <immintrin.h> and kernels/gemm_internal.h.

// Quad-row q (0..3) of a 6-bit group (layout in quantized_matrix.h). The
// 16-bit shifts are safe: the masks drop the bits that cross a byte.
inline __m512i Unpack6(const uint8_t* codes, int q) {
  const __m512i m6 = _mm512_set1_epi8(0x3f);
  if (q < 2) return _mm512_and_si512(_mm512_load_si512(codes + 64 * q), m6);
  const __m512i top = _mm512_load_si512(codes + 64 * (q - 2));
  const __m512i low = _mm512_load_si512(codes + 128);
  const __m512i lo =
      _mm512_and_si512(q == 2 ? low : _mm512_srli_epi16(low, 4), _mm512_set1_epi8(0x0f));
  return _mm512_or_si512(lo, _mm512_and_si512(_mm512_srli_epi16(top, 2), _mm512_set1_epi8(0x30)));
}

// A kU4K panel's scale arrays (quantized_matrix.h).
struct KPanel {
  const uint8_t *sc, *mn;
  const float *sd, *sm;
  KPanel(const QuantizedMatrix& w, int64_t p)
      : sc(w.k_scales(p)), mn(w.k_mins(p)), sd(w.super_scales(p)), sm(w.super_mins(p)) {}
};

// kU4K: d = d_super * sc and c = -(dmin * m) for the 16 rows of group g.
inline void KScales(const KPanel& k, int64_t g, __m512* d, __m512* c) {
  const int64_t at = g / 8 * kPanelRows;
  const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.sc + g * kPanelRows))));
  const __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.mn + g * kPanelRows))));
  *d = _mm512_mul_ps(_mm512_loadu_ps(k.sd + at), sc);
  *c = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(_mm512_loadu_ps(k.sm + at), mn));
}
