// Scalar GEMM tiles: the reference every SIMD path is tested against, and
// the fallback. Reads the packed codes in place, one group at a time.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {
namespace {

template <PackKind kKind>
void TileScalar(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
                int64_t panel_end) {
  constexpr int S = kKind == PackKind::kU6G16 ? 16 : 32;
  const QuantizedMatrix& w = *a.w;
  const int64_t groups = w.num_groups();
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const float* d = w.scales(p);
    const float* c = w.offsets(p);
    const uint8_t* ksc = w.k_scales(p);
    const uint8_t* kmn = w.k_mins(p);
    const float* sd = w.super_scales(p);
    const float* sm = w.super_mins(p);
    const int n_valid = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - p * kPanelRows));
    for (int64_t r = row_begin; r < row_end; ++r) {
      const int8_t* xq = a.x->row_q(r);
      const float* sx = a.x->row_scale(r);
      const int32_t* sum16 = a.x->row_sum16(r);
      float acc[kPanelRows] = {};
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* codes = w.codes(p, g);
        const int64_t k0 = g * S;
        const float s = sx[k0 / kActBlock];
        const float xs = s * static_cast<float>(ActGroupSum(sum16, k0, S));
        for (int n = 0; n < kPanelRows; ++n) {
          int32_t dot = 0;
          for (int e = 0; e < S; ++e) {
            int u;
            if constexpr (PackIsFourBit(kKind)) {
              const int ee = e & 15;
              const uint8_t b = codes[((ee / 4) * kPanelRows + n) * 4 + ee % 4];
              u = e < 16 ? (b & 0xf) : (b >> 4);
            } else if constexpr (kKind == PackKind::kU6G16) {
              const int q = e / 4, at = n * 4 + e % 4;
              u = q < 2 ? codes[64 * q + at] & 63
                        : ((codes[128 + at] >> (4 * (q - 2))) & 15) |
                              (codes[64 * (q - 2) + at] >> 6) << 4;
            } else {
              u = codes[((e / 4) * kPanelRows + n) * 4 + e % 4];
            }
            dot += u * xq[k0 + e];
          }
          float dn, cn;
          if constexpr (kKind == PackKind::kU4K) {
            const int64_t at = g / 8 * kPanelRows + n;
            dn = sd[at] * static_cast<float>(ksc[g * kPanelRows + n]);
            cn = -(sm[at] * static_cast<float>(kmn[g * kPanelRows + n]));
          } else {
            dn = d[g * kPanelRows + n];
            cn = c != nullptr ? c[g * kPanelRows + n] : -std::ldexp(dn, w.offset_shift);
          }
          acc[n] += s * dn * static_cast<float>(dot) + cn * xs;
        }
      }
      std::memcpy(a.y + r * a.y_stride + p * kPanelRows, acc, n_valid * sizeof(float));
    }
  }
}

}  // namespace

void FillScalarKernels(GemmKernels* k) {
  k->tile[static_cast<int>(PackKind::kU4K)] = TileScalar<PackKind::kU4K>;
  k->tile[static_cast<int>(PackKind::kU4G32)] = TileScalar<PackKind::kU4G32>;
  k->tile[static_cast<int>(PackKind::kU8G32)] = TileScalar<PackKind::kU8G32>;
  k->tile[static_cast<int>(PackKind::kU6G16)] = TileScalar<PackKind::kU6G16>;
}

}  // namespace dllm::gemm_internal
