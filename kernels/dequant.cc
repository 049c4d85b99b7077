// Scalar dequantization, written to reproduce ggml's results bit for bit.
// Each block decoder keeps ggml's order of float operations (which products
// are formed first, whether an offset is subtracted as an int or a float),
// because a different but algebraically equal order rounds differently.
// The file is built for baseline x86-64, so no FMA contraction can occur.
#include "kernels/dequant.h"

#include <cmath>
#include <cstring>

#include "kernels/block_types.h"

namespace dllm {
namespace {

uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FloatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The 6-bit scale and min of sub-block `j` (0..7) of a Q4_K/Q5_K super-block:
// sub-blocks 0-3 keep theirs in the low 6 bits of bytes 0-3 (scales) and 4-7
// (mins); sub-blocks 4-7 split theirs between the nibbles of bytes 8-11 and
// the top 2 bits of bytes 0-7.
void ScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void DequantizeQ4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = (x[i].qs[j] & 0x0F) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[j] = x0 * d;
      y[j + kQK / 2] = x1 * d;
    }
  }
}

void DequantizeQ4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    const float m = Fp16ToFp32(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = x[i].qs[j] & 0x0F;
      const int x1 = x[i].qs[j] >> 4;
      y[j] = x0 * d + m;
      y[j + kQK / 2] = x1 * d + m;
    }
  }
}

// Q5 blocks: bit j of the little-endian 32-bit `qh` is the 5th bit of
// element j (j < 16), bit j + 16 that of element j + 16.
void DequantizeQ5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      const int x0 = ((x[i].qs[j] & 0x0F) | h0) - 16;
      const int x1 = ((x[i].qs[j] >> 4) | h1) - 16;
      y[j] = x0 * d;
      y[j + kQK / 2] = x1 * d;
    }
  }
}

void DequantizeQ5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    const float m = Fp16ToFp32(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      const int x0 = (x[i].qs[j] & 0x0F) | h0;
      const int x1 = (x[i].qs[j] >> 4) | h1;
      y[j] = x0 * d + m;
      y[j + kQK / 2] = x1 * d + m;
    }
  }
}

void DequantizeQ8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = x[i].qs[j] * d;
  }
}

// Q4_K: per 64 elements, the low nibbles of 32 bytes are sub-block 2k and
// the high nibbles sub-block 2k + 1. `d * sc` and `dmin * m` are rounded to
// float before the element product, as ggml does.
void DequantizeQ4_K(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = Fp16ToFp32(x[i].d);
    const float dmin = Fp16ToFp32(x[i].dmin);
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      ScaleMinK4(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      ScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

// Q5_K: as Q4_K, with the 5th bit of sub-block s in bit s of `qh[l]`.
void DequantizeQ5_K(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const float d = Fp16ToFp32(x[i].d);
    const float dmin = Fp16ToFp32(x[i].dmin);
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      ScaleMinK4(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      ScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

// Q6_K: each 128-element half uses 64 `ql` bytes, 32 `qh` bytes and 8
// scales; element l + 32 k takes the low (k even) or high (k odd) nibble of
// ql[l + 32 (k & 1)] and bits 2k..2k+1 of qh[l]. Value = (d * sc) * (q - 32).
void DequantizeQ6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

}  // namespace

// Exponent re-biasing by float multiplication (normals) and a magic-number
// subtraction (subnormals); both are exact, and inf/NaN pass through the
// multiply (a signalling NaN comes out quiet, as with ggml's scalar path).
float Fp16ToFp32(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float normalized = FloatOf((two_w >> 4) + exp_offset) * 0x1.0p-112f;
  const uint32_t magic_mask = 126u << 23;
  const float denormalized = FloatOf((two_w >> 17) | magic_mask) - 0.5f;
  const uint32_t denormalized_cutoff = 1u << 27;
  return FloatOf(sign | (two_w < denormalized_cutoff ? BitsOf(denormalized) : BitsOf(normalized)));
}

// Rounds to nearest even by letting a float addition do the rounding: adding
// a power of two chosen from `f`'s exponent leaves exactly the 10 (or fewer,
// for subnormal results) mantissa bits a half keeps. Overflow becomes inf via
// the 2^112 pre-scale; every NaN becomes the quiet NaN 0x7E00 (sign kept).
uint16_t Fp32ToFp16(float f) {
  float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = BitsOf(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = FloatOf((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = BitsOf(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float Bf16ToFp32(uint16_t h) { return FloatOf(static_cast<uint32_t>(h) << 16); }

uint16_t Fp32ToBf16(float f) {
  const uint32_t u = BitsOf(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((u >> 16) | 64);  // NaN: force the quiet bit
  }
  return static_cast<uint16_t>((u + (0x7FFFu + ((u >> 16) & 1))) >> 16);
}

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / TraitsOf(type).block_size;
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(h[i]);
      return;
    }
    case GgmlType::kBF16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(h[i]);
      return;
    }
    case GgmlType::kQ4_0:
      return DequantizeQ4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case GgmlType::kQ4_1:
      return DequantizeQ4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case GgmlType::kQ5_0:
      return DequantizeQ5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case GgmlType::kQ5_1:
      return DequantizeQ5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case GgmlType::kQ8_0:
      return DequantizeQ8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case GgmlType::kQ4_K:
      return DequantizeQ4_K(static_cast<const BlockQ4_K*>(src), dst, nb);
    case GgmlType::kQ5_K:
      return DequantizeQ5_K(static_cast<const BlockQ5_K*>(src), dst, nb);
    case GgmlType::kQ6_K:
      return DequantizeQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
    default:
      // Unsupported types are excluded by the header's contract.
      return;
  }
}

}  // namespace dllm
