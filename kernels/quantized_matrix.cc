// Load-time repacking of GGUF weights into the panel layout of
// quantized_matrix.h. Decodes each format's blocks into unsigned codes plus a
// per-group scale and offset (formulas from the GGUF block definitions).
#include "kernels/quantized_matrix.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/block_types.h"

namespace dllm {
namespace {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: value = man * 2^-24
      float f = std::ldexp(static_cast<float>(man), -24);
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float BfloatToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Q4_K / Q5_K: the j-th 6-bit scale and min of the 12 packed bytes.
void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_0: 4-bit codes, offset -8 d.
void DecodeQ4_0(const uint8_t* src, int64_t cols, uint8_t* u, float* d, float* c) {
  const auto* b = reinterpret_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < cols / kQK; ++i, u += kQK) {
    const float s = HalfToFloat(b[i].d);
    for (int j = 0; j < 16; ++j) {
      u[j] = b[i].qs[j] & 0xf;
      u[j + 16] = b[i].qs[j] >> 4;
    }
    d[i] = s;
    c[i] = -std::ldexp(s, PackOffsetShift(GgmlType::kQ4_0));
  }
}

// Q4_1: 4-bit codes, scale d and min m.
void DecodeQ4_1(const uint8_t* src, int64_t cols, uint8_t* u, float* d, float* c) {
  const auto* b = reinterpret_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < cols / kQK; ++i, u += kQK) {
    for (int j = 0; j < 16; ++j) {
      u[j] = b[i].qs[j] & 0xf;
      u[j + 16] = b[i].qs[j] >> 4;
    }
    d[i] = HalfToFloat(b[i].d);
    c[i] = HalfToFloat(b[i].m);
  }
}

// Q5_0 / Q5_1: 4 low bits plus a fifth from qh; offset -16 d or the min.
void DecodeQ5(GgmlType type, const uint8_t* src, int64_t cols, uint8_t* u, float* d, float* c) {
  const bool has_min = type == GgmlType::kQ5_1;
  const size_t bytes = has_min ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0);
  for (int64_t i = 0; i < cols / kQK; ++i, u += kQK) {
    const uint8_t* blk = src + i * bytes;
    uint16_t dh, mh = 0;
    std::memcpy(&dh, blk, 2);
    if (has_min) std::memcpy(&mh, blk + 2, 2);
    const uint8_t* qhp = blk + (has_min ? 4 : 2);
    const uint8_t* qs = qhp + 4;
    uint32_t qh;
    std::memcpy(&qh, qhp, 4);
    for (int j = 0; j < 16; ++j) {
      u[j] = (qs[j] & 0xf) | (((qh >> j) << 4) & 0x10);
      u[j + 16] = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
    }
    d[i] = HalfToFloat(dh);
    c[i] = has_min ? HalfToFloat(mh) : -std::ldexp(d[i], PackOffsetShift(GgmlType::kQ5_0));
  }
}

// Q8_0: signed bytes, shifted to unsigned (offset -128 d).
void DecodeQ8_0(const uint8_t* src, int64_t cols, uint8_t* u, float* d, float* c) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < cols / kQK; ++i, u += kQK) {
    for (int j = 0; j < kQK; ++j) u[j] = static_cast<uint8_t>(b[i].qs[j] + 128);
    d[i] = HalfToFloat(b[i].d);
    c[i] = -std::ldexp(d[i], PackOffsetShift(GgmlType::kQ8_0));
  }
}

// Q4_K / Q5_K: super-blocks of 256, eight groups of 32 with 6-bit scales
// and mins (Q5_K adds a fifth bit from qh).
void DecodeQ4K(GgmlType type, const uint8_t* src, int64_t cols, uint8_t* u, float* d, float* c) {
  const bool five = type == GgmlType::kQ5_K;
  for (int64_t i = 0; i < cols / kQKK; ++i) {
    const uint8_t *scales, *qs, *qh = nullptr;
    uint16_t dh, mh;
    if (five) {
      const auto* b = reinterpret_cast<const BlockQ5_K*>(src) + i;
      dh = b->d, mh = b->dmin, scales = b->scales, qs = b->qs, qh = b->qh;
    } else {
      const auto* b = reinterpret_cast<const BlockQ4_K*>(src) + i;
      dh = b->d, mh = b->dmin, scales = b->scales, qs = b->qs;
    }
    const float dd = HalfToFloat(dh), dmin = HalfToFloat(mh);
    for (int j = 0; j < 4; ++j) {  // 64 elements: two groups per 32 bytes
      for (int h = 0; h < 2; ++h) {
        const int g = 2 * j + h;
        int sc, m;
        ScaleMinK4(g, scales, &sc, &m);
        d[i * 8 + g] = dd * sc;
        c[i * 8 + g] = -dmin * m;
        for (int l = 0; l < 32; ++l) {
          uint8_t v = h == 0 ? (qs[32 * j + l] & 0xf) : (qs[32 * j + l] >> 4);
          if (five && (qh[l] >> g) & 1) v += 16;
          u[i * kQKK + 32 * g + l] = v;
        }
      }
    }
  }
}

// Q6_K: super-blocks of 256, 4 + 2 bits, sixteen groups of 16 (offset -32 d).
void DecodeQ6K(const uint8_t* src, int64_t cols, uint8_t* u, float* d, float* c) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < cols / kQKK; ++i) {
    const float dd = HalfToFloat(b[i].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      uint8_t* o = u + i * kQKK + 128 * half;
      for (int l = 0; l < 32; ++l) {
        o[l] = (ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4);
        o[l + 32] = (ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4);
        o[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
        o[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
      }
    }
    for (int g = 0; g < 16; ++g) {
      d[i * 16 + g] = dd * b[i].scales[g];
      c[i * 16 + g] = -std::ldexp(d[i * 16 + g], PackOffsetShift(GgmlType::kQ6_K));
    }
  }
}

// F32 / F16 / BF16: quantized here to int8 per group of 32, symmetric (amax / 127).
void DecodeFloat(GgmlType type, const uint8_t* src, int64_t cols, uint8_t* u, float* d, float* c) {
  for (int64_t i = 0; i < cols / kQK; ++i, u += kQK) {
    float w[kQK];
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      const int64_t k = i * kQK + j;
      if (type == GgmlType::kF32) {
        std::memcpy(&w[j], src + 4 * k, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, src + 2 * k, 2);
        w[j] = type == GgmlType::kF16 ? HalfToFloat(h) : BfloatToFloat(h);
      }
      amax = std::max(amax, std::fabs(w[j]));
    }
    const float s = amax / 127.0f;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    for (int j = 0; j < kQK; ++j) {
      const int q = static_cast<int>(std::nearbyint(w[j] * inv));
      u[j] = static_cast<uint8_t>(std::clamp(q, -127, 127) + 128);
    }
    d[i] = s;
    c[i] = -std::ldexp(s, PackOffsetShift(type));
  }
}

// Decodes one row of `cols` elements into codes `u`, and per group of
// PackGroupSize elements a scale `d` and offset `c`.
void DecodeRow(GgmlType type, const uint8_t* src, int64_t cols, uint8_t* u, float* d, float* c) {
  switch (type) {
    case GgmlType::kQ4_0:
      return DecodeQ4_0(src, cols, u, d, c);
    case GgmlType::kQ4_1:
      return DecodeQ4_1(src, cols, u, d, c);
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
      return DecodeQ5(type, src, cols, u, d, c);
    case GgmlType::kQ8_0:
      return DecodeQ8_0(src, cols, u, d, c);
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return DecodeQ4K(type, src, cols, u, d, c);
    case GgmlType::kQ6_K:
      return DecodeQ6K(src, cols, u, d, c);
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return DecodeFloat(type, src, cols, u, d, c);
    default:
      return;  // contract: PackSupported(type)
  }
}

}  // namespace

bool PackSupported(GgmlType type) {
  // Every type the kernels run (the type table's `supported` column).
  return TraitsOf(type).supported;
}

PackKind PackKindOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      return PackKind::kU4G32;
    case GgmlType::kQ4_K:
      return PackKind::kU4K;
    case GgmlType::kQ6_K:
      return PackKind::kU6G16;
    default:
      return PackKind::kU8G32;
  }
}

int PackOffsetShift(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return 3;  // codes 0..15 around 8
    case GgmlType::kQ5_0:
      return 4;  // 0..31 around 16
    case GgmlType::kQ6_K:
      return 5;            // 0..63 around 32
    case GgmlType::kQ8_0:  // signed bytes shifted by 128
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 7;
    default:
      return -1;
  }
}

int64_t PackKMultiple(GgmlType type) { return std::max<int64_t>(32, TraitsOf(type).block_size); }

size_t PackedBytes(GgmlType type, int64_t rows, int64_t cols) {
  QuantizedMatrix m;
  m.kind = PackKindOf(type);
  m.rows = rows;
  m.cols = cols;
  const size_t panel =
      m.kind == PackKind::kU4K
          ? m.num_groups() * (m.group_code_bytes() + 2 * kPanelRows) +
                m.num_groups() / 8 * 2 * kPanelRows * sizeof(float)
          : m.num_groups() * (m.group_code_bytes() +
                              (PackHasOffsets(m.kind) ? 2 : 1) * kPanelRows * sizeof(float));
  return panel * m.num_panels();
}

QuantizedMatrix PackedView(GgmlType type, int64_t rows, int64_t cols, void* dst) {
  QuantizedMatrix m;
  m.type = type;
  m.kind = PackKindOf(type);
  m.offset_shift = PackOffsetShift(type);
  m.rows = rows;
  m.cols = cols;
  m.panel_bytes = PackedBytes(type, kPanelRows, cols);
  m.data = static_cast<const uint8_t*>(dst);
  return m;
}

void PackPanels(const QuantizedMatrix& m, const void* src, int64_t panel_begin, int64_t panel_end) {
  const GgmlType type = m.type;
  const int64_t cols = m.cols, rows = m.rows;
  const int S = PackGroupSize(m.kind);
  const int64_t groups = m.num_groups();
  const int bits = PackCodeBits(m.kind);
  const size_t row_bytes = RowBytes(type, cols);
  std::vector<uint8_t> u(cols);
  std::vector<float> d(groups), c(groups);
  auto* out = const_cast<uint8_t*>(m.data);  // the caller's writable buffer (PackedView)
  std::memset(out + panel_begin * m.panel_bytes, 0, m.panel_bytes * (panel_end - panel_begin));
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    uint8_t* panel = out + p * m.panel_bytes;
    const bool k4 = m.kind == PackKind::kU4K;
    float* pd = k4 ? nullptr : reinterpret_cast<float*>(panel + groups * m.group_code_bytes());
    float* pc = !k4 && PackHasOffsets(m.kind) ? pd + groups * kPanelRows : nullptr;
    for (int r = 0; r < kPanelRows; ++r) {
      const int64_t row = p * kPanelRows + r;
      if (row >= rows) break;  // padding rows stay zero: d = c = 0
      const uint8_t* row_src = static_cast<const uint8_t*>(src) + row * row_bytes;
      DecodeRow(type, row_src, cols, u.data(), d.data(), c.data());
      if (k4) {  // the file's super-block scales and 6-bit sub-scales, unexpanded
        auto* sc = const_cast<uint8_t*>(m.k_scales(p));
        auto* mn = const_cast<uint8_t*>(m.k_mins(p));
        auto* sd = const_cast<float*>(m.super_scales(p));
        auto* sm = const_cast<float*>(m.super_mins(p));
        for (int64_t i = 0; i < cols / kQKK; ++i) {
          const auto* b = reinterpret_cast<const BlockQ4_K*>(row_src) + i;
          sd[i * kPanelRows + r] = HalfToFloat(b->d);
          sm[i * kPanelRows + r] = HalfToFloat(b->dmin);
          for (int j = 0; j < 8; ++j) {
            int s, mm;
            ScaleMinK4(j, b->scales, &s, &mm);
            sc[(i * 8 + j) * kPanelRows + r] = static_cast<uint8_t>(s);
            mn[(i * 8 + j) * kPanelRows + r] = static_cast<uint8_t>(mm);
          }
        }
      }
      for (int64_t g = 0; g < groups; ++g) {
        uint8_t* codes = panel + g * m.group_code_bytes();
        if (pd != nullptr) pd[g * kPanelRows + r] = d[g];
        if (pc != nullptr) pc[g * kPanelRows + r] = c[g];
        for (int e = 0; e < S; ++e) {
          const uint8_t v = u[g * S + e];
          if (bits == 4) {
            const int ee = e & 15;
            const size_t at = ((ee / 4) * kPanelRows + r) * 4 + ee % 4;
            codes[at] |= e < 16 ? v : static_cast<uint8_t>(v << 4);
          } else if (bits == 6) {
            const int q = e / 4;
            const size_t at = r * 4 + e % 4;  // byte within each 64-byte vector
            if (q < 2) {                      // whole code in vector q
              codes[64 * q + at] |= v;
            } else {  // high 2 bits on top of vector q - 2, low nibble in vector 2
              codes[64 * (q - 2) + at] |= static_cast<uint8_t>((v >> 4) << 6);
              codes[128 + at] |= static_cast<uint8_t>((v & 0xf) << (4 * (q - 2)));
            }
          } else {
            codes[((e / 4) * kPanelRows + r) * 4 + e % 4] = v;
          }
        }
      }
    }
  }
}

QuantizedMatrix PackMatrix(GgmlType type, const void* src, int64_t rows, int64_t cols, void* dst) {
  const QuantizedMatrix m = PackedView(type, rows, cols, dst);
  PackPanels(m, src, 0, m.num_panels());
  return m;
}

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

PackedMatrix::PackedMatrix(GgmlType type, const void* src, int64_t rows, int64_t cols) {
  bytes_ = PackedBytes(type, rows, cols);
  const size_t alloc = (std::max<size_t>(bytes_, 64) + 63) / 64 * 64;
  storage_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, alloc)));
  view_ = PackMatrix(type, src, rows, cols, storage_.get());
}

size_t ReleaseMappedRange(const void* data, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end <= begin) return 0;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) return 0;
  return end - begin;
}

}  // namespace dllm
