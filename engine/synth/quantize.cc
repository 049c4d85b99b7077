// Reference quantizers. Legacy formats (Q4_0 ... Q8_0) take their scale from
// the block's extreme values, as ggml does. The K formats search: for each
// sub-block a handful of candidate scales are tried, and for each candidate's
// integer levels the least-squares scale (and min) is solved in closed form;
// the best fit wins. Sub-block scales are then themselves quantized against
// one fp16 super-block scale, and the levels recomputed with the scales the
// decoder will actually see.
#include "engine/synth/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/block_types.h"
#include "kernels/dequant.h"

namespace dllm {
namespace {

int NearestInt(float v) { return static_cast<int>(std::lrintf(v)); }

int Clamp(int v, int lo, int hi) { return std::min(std::max(v, lo), hi); }

// The signed value of largest magnitude (the sign decides which end of the
// asymmetric range [-2^(b-1), 2^(b-1) - 1] it lands on).
float SignedAbsMax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

void QuantizeQ4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float max = SignedAbsMax(x, kQK);
    const float d = max / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      // +8.5 then truncation: round half up on the shifted, non-negative value.
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeQ5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float max = SignedAbsMax(x, kQK);
    const float d = max / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
      const int q1 = std::min(31, static_cast<int>(x[j + kQK / 2] * id + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 15) | ((q1 & 15) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + kQK / 2);
    }
    for (int k = 0; k < 4; ++k) y[i].qh[k] = static_cast<uint8_t>(qh >> (8 * k));
  }
}

// Q4_1 / Q5_1: value = d * q + m over [min, max] with 2^bits levels.
template <typename Block, int kLevels>
void QuantizeMinMax(const float* x, Block* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min = x[0], max = x[0];
    for (int j = 1; j < kQK; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / (kLevels - 1);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(kLevels - 1, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(kLevels - 1, static_cast<int>((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 15) | ((q1 & 15) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + kQK / 2);
    }
    if constexpr (kLevels == 32) {
      for (int k = 0; k < 4; ++k) y[i].qh[k] = static_cast<uint8_t>(qh >> (8 * k));
    }
  }
}

void QuantizeQ8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(NearestInt(x[j] * id));
  }
}

// Fits x ~ scale * L - min_out with L in [0, nmax] (min_out >= 0), weighted
// by `w`, for one sub-block of `n` values. Tries `nstep` level assignments
// from scales around nmax / (max - min), solving the weighted least-squares
// scale and offset for each; returns the scale and writes the best levels.
float FitScaleMin(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out,
                  float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0], sum_w = 0, sum_x = 0;
  for (int i = 0; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;  // the offset only ever lowers the range
  if (max == min) {
    std::fill(L, L + n, 0);
    *min_out = -min;
    return 0;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_err = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_err += w[i] * diff * diff;
  }
  uint8_t trial[kQK];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * step + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {  // a positive offset cannot be stored: refit through 0
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * trial[i] + this_min - x[i];
      err += w[i] * diff * diff;
    }
    if (err < best_err) {
      std::memcpy(L, trial, static_cast<size_t>(n));
      best_err = err;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

// Packs sub-block j's 6-bit scale and min into the 12-byte K-quant field
// (the inverse of the decoder's unpacking; see dequant.cc).
void PackScaleMinK4(int j, int sc, int m, uint8_t* q) {
  if (j < 4) {
    q[j] = static_cast<uint8_t>((q[j] & 0xC0) | sc);
    q[j + 4] = static_cast<uint8_t>((q[j + 4] & 0xC0) | m);
  } else {
    q[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    q[j - 4] = static_cast<uint8_t>(q[j - 4] | ((sc >> 4) << 6));
    q[j] = static_cast<uint8_t>(q[j] | ((m >> 4) << 6));
  }
}

void UnpackScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): fills d, dmin and scales and
// writes the final levels of the 256 values to L.
template <typename Block>
void QuantizeKScales(const float* x, Block* y, int nmax, float rmin, float rdelta, int nstep,
                     uint8_t* L) {
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    // Weight large values more, but never ignore small ones.
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    scales[j] = FitScaleMin(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, rdelta, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63 / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63 / max_min : 0.0f;
  std::memset(y->scales, 0, sizeof(y->scales));
  for (int j = 0; j < 8; ++j) {
    // Clamped below too: a degenerate fit may return a tiny negative scale.
    PackScaleMinK4(j, Clamp(NearestInt(inv_scale * scales[j]), 0, 63),
                   Clamp(NearestInt(inv_min * mins[j]), 0, 63), y->scales);
  }
  y->d = Fp32ToFp16(max_scale / 63);
  y->dmin = Fp32ToFp16(max_min / 63);
  // Recompute levels against the scales the decoder will reconstruct.
  const float d_all = Fp16ToFp32(y->d), dmin_all = Fp16ToFp32(y->dmin);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    UnpackScaleMinK4(j, y->scales, &sc, &m);
    const float d = d_all * sc;
    if (d == 0) {
      std::fill(L + 32 * j, L + 32 * j + 32, 0);
      continue;
    }
    const float dm = dmin_all * m;
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] = static_cast<uint8_t>(Clamp(NearestInt((x[32 * j + l] + dm) / d), 0, nmax));
    }
  }
}

void QuantizeQ4_K(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t L[kQKK];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    QuantizeKScales(x, &y[i], 15, -1.0f, 0.1f, 20, L);
    for (int j = 0; j < kQKK; j += 64) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
      }
    }
  }
}

void QuantizeQ5_K(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t L[kQKK];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    QuantizeKScales(x, &y[i], 31, -0.5f, 0.1f, 15, L);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    uint8_t m1 = 1, m2 = 2;
    for (int j = 0; j < kQKK; j += 64, m1 <<= 2, m2 <<= 2) {
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[j + l], l2 = L[j + l + 32];
        if (l1 > 15) y[i].qh[l] |= m1;
        if (l2 > 15) y[i].qh[l] |= m2;
        y[i].qs[j / 2 + l] = static_cast<uint8_t>((l1 & 15) | ((l2 & 15) << 4));
      }
    }
  }
}

// Fits x ~ scale * q with q in [-nmax, nmax - 1], weighting each value by
// its square (big values dominate the error), over a sweep of 19 candidate
// scales around the one that maps the extreme value onto -nmax. Writes the
// levels (as q + nmax) and returns the scale.
float FitScaleSymmetric(int n, int nmax, const float* x, uint8_t* L) {
  const float max = SignedAbsMax(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + n, static_cast<uint8_t>(nmax));
    return 0;
  }
  float best_scale = 0, best = -1;
  for (int step = -9; step <= 9; ++step) {
    const float iscale = -(nmax + 0.1f * step) / max;
    float sum_lx = 0, sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
    // With the optimal scale sum_lx / sum_l2, the error falls as
    // sum_lx^2 / sum_l2 rises.
    if (sum_l2 > 0 && (best < 0 || sum_lx * sum_lx > best * sum_l2)) {
      best_scale = sum_lx / sum_l2;
      best = best_scale * sum_lx;
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<uint8_t>(nmax + Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
      }
    }
  }
  return best_scale;
}

void QuantizeQ6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  uint8_t L[kQKK];
  float scales[kQKK / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQKK / 16; ++ib) {
      scales[ib] = FitScaleSymmetric(16, 32, x + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    std::memset(&y[i], 0, sizeof(y[i]));
    if (max_abs_scale < 1e-15f) {
      // All zero: d = 0 and level 32 (value 0) everywhere.
      std::fill(L, L + kQKK, 32);
    } else {
      // Int8 sub-scales against one fp16 scale; the sign of the largest
      // sub-scale puts it at -128, the end with the extra step.
      const float iscale = -128.0f / max_scale;
      y[i].d = Fp32ToFp16(1 / iscale);
      for (int ib = 0; ib < kQKK / 16; ++ib) {
        y[i].scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
      }
      const float d_all = Fp16ToFp32(y[i].d);
      for (int ib = 0; ib < kQKK / 16; ++ib) {
        const float d = d_all * y[i].scales[ib];
        for (int l = 0; l < 16; ++l) {
          const int q = d != 0 ? Clamp(NearestInt(x[16 * ib + l] / d), -32, 31) : 0;
          L[16 * ib + l] = static_cast<uint8_t>(q + 32);
        }
      }
    }
    for (int j = 0; j < kQKK; j += 128) {
      uint8_t* ql = y[i].ql + j / 2;
      uint8_t* qh = y[i].qh + j / 4;
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 15) | ((q3 & 15) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 15) | ((q4 & 15) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                     ((q4 >> 4) << 6));
      }
    }
  }
}

}  // namespace

bool CanQuantize(GgmlType type) {
  // Every type the kernels run (the type table's `supported` column).
  return TraitsOf(type).supported;
}

void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / TraitsOf(type).block_size;
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16: {
      uint16_t* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToFp16(src[i]);
      return;
    }
    case GgmlType::kBF16: {
      uint16_t* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = Fp32ToBf16(src[i]);
      return;
    }
    case GgmlType::kQ4_0:
      return QuantizeQ4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case GgmlType::kQ4_1:
      return QuantizeMinMax<BlockQ4_1, 16>(src, static_cast<BlockQ4_1*>(dst), nb);
    case GgmlType::kQ5_0:
      return QuantizeQ5_0(src, static_cast<BlockQ5_0*>(dst), nb);
    case GgmlType::kQ5_1:
      return QuantizeMinMax<BlockQ5_1, 32>(src, static_cast<BlockQ5_1*>(dst), nb);
    case GgmlType::kQ8_0:
      return QuantizeQ8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case GgmlType::kQ4_K:
      return QuantizeQ4_K(src, static_cast<BlockQ4_K*>(dst), nb);
    case GgmlType::kQ5_K:
      return QuantizeQ5_K(src, static_cast<BlockQ5_K*>(dst), nb);
    case GgmlType::kQ6_K:
      return QuantizeQ6_K(src, static_cast<BlockQ6_K*>(dst), nb);
    default:
      return;  // excluded by the header's contract
  }
}

}  // namespace dllm
