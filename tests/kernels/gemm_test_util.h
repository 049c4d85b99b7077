// Test-only helpers for the GEMM tests: random GGUF weight rows of every
// packable type, an independent float64 decode of them (from the GGUF block
// definitions) checked against the project oracle kernels/dequant.h, whose
// values the reference products use, and the GEMM checker.
#ifndef DLLM_TESTS_KERNELS_GEMM_TEST_UTIL_H_
#define DLLM_TESTS_KERNELS_GEMM_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/block_types.h"
#include "kernels/dequant.h"
#include "kernels/gemm.h"
#include "kernels/ggml_types.h"
#include "kernels/quantize_act.h"
#include "kernels/quantized_matrix.h"

namespace dllm::testing {

inline double HalfToDouble(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

// A random half in +-[2^-6, 2) (or positive only).
inline uint16_t RandomHalf(std::mt19937& rng, bool positive) {
  std::uniform_int_distribution<int> exp(9, 15), man(0, 1023), sign(0, 1);
  return static_cast<uint16_t>(((positive ? 0 : sign(rng)) << 15) | (exp(rng) << 10) | man(rng));
}

inline void PutHalf(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

// `rows` random rows of `cols` elements of `type`, back to back.
inline std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t cols,
                                          std::mt19937& rng) {
  const GgmlTypeTraits& t = TraitsOf(type);
  const size_t row_bytes = RowBytes(type, cols);
  std::vector<uint8_t> out(row_bytes * rows);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = out.data() + r * row_bytes;
    if (type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16) {
      for (int64_t k = 0; k < cols; ++k) {
        const float v = normal(rng);
        if (type == GgmlType::kF32) {
          std::memcpy(row + 4 * k, &v, 4);
        } else {
          uint32_t bits;
          std::memcpy(&bits, &v, 4);
          uint16_t h;
          if (type == GgmlType::kBF16) {
            h = static_cast<uint16_t>(bits >> 16);
          } else {
            h = RandomHalf(rng, false);  // any normal half is a fine weight
          }
          std::memcpy(row + 2 * k, &h, 2);
        }
      }
      continue;
    }
    for (size_t i = 0; i < row_bytes; ++i) row[i] = static_cast<uint8_t>(byte(rng));
    for (int64_t b = 0; b < cols / t.block_size; ++b) {
      uint8_t* blk = row + b * t.type_size;
      switch (type) {
        case GgmlType::kQ4_1:
        case GgmlType::kQ5_1:
          PutHalf(blk, RandomHalf(rng, false));
          PutHalf(blk + 2, RandomHalf(rng, false));
          break;
        case GgmlType::kQ4_K:
        case GgmlType::kQ5_K:
          PutHalf(blk, RandomHalf(rng, true));
          PutHalf(blk + 2, RandomHalf(rng, true));
          break;
        case GgmlType::kQ6_K:
          PutHalf(blk + 208, RandomHalf(rng, false));
          break;
        default:
          PutHalf(blk, RandomHalf(rng, false));
      }
    }
  }
  return out;
}

inline void ScaleMin(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Dequantizes one row to `w`. `off` gets, per element, the magnitude of the
// additive constant of its scale group in the packed scheme (used only to
// size float-rounding bounds).
inline void RefDequantRow(GgmlType type, const uint8_t* src, int64_t cols, double* w, double* off) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t k = 0; k < cols; ++k) {
        if (type == GgmlType::kF32) {
          float f;
          std::memcpy(&f, src + 4 * k, 4);
          w[k] = f;
        } else {
          uint16_t h;
          std::memcpy(&h, src + 2 * k, 2);
          if (type == GgmlType::kF16) {
            w[k] = HalfToDouble(h);
          } else {
            const uint32_t bits = static_cast<uint32_t>(h) << 16;
            float f;
            std::memcpy(&f, &bits, 4);
            w[k] = f;
          }
        }
      }
      for (int64_t b = 0; b < cols / 32; ++b) {
        double amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[32 * b + j]));
        for (int j = 0; j < 32; ++j) off[32 * b + j] = amax * 128.0 / 127.0;
      }
      return;
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0: {
      const size_t bs = TraitsOf(type).type_size;
      for (int64_t b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = src + b * bs;
        uint16_t dh, mh = 0;
        std::memcpy(&dh, blk, 2);
        const double d = HalfToDouble(dh);
        double* o = w + 32 * b;
        double c = 0;
        if (type == GgmlType::kQ8_0) {
          for (int j = 0; j < 32; ++j) o[j] = d * static_cast<int8_t>(blk[2 + j]);
          c = -128 * d;
        } else if (type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1) {
          const bool min = type == GgmlType::kQ4_1;
          if (min) std::memcpy(&mh, blk + 2, 2);
          const uint8_t* qs = blk + (min ? 4 : 2);
          const double m = min ? HalfToDouble(mh) : -8 * d;
          for (int j = 0; j < 16; ++j) {
            o[j] = d * (qs[j] & 0xf) + m;
            o[j + 16] = d * (qs[j] >> 4) + m;
          }
          c = m;
        } else {
          const bool min = type == GgmlType::kQ5_1;
          if (min) std::memcpy(&mh, blk + 2, 2);
          uint32_t qh;
          std::memcpy(&qh, blk + (min ? 4 : 2), 4);
          const uint8_t* qs = blk + (min ? 8 : 6);
          const double m = min ? HalfToDouble(mh) : -16 * d;
          for (int j = 0; j < 16; ++j) {
            const int x0 = (qs[j] & 0xf) | (((qh >> j) << 4) & 0x10);
            const int x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
            o[j] = d * x0 + m;
            o[j + 16] = d * x1 + m;
          }
          c = m;
        }
        for (int j = 0; j < 32; ++j) off[32 * b + j] = std::fabs(c);
      }
      return;
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const bool five = type == GgmlType::kQ5_K;
      const size_t bs = TraitsOf(type).type_size;
      for (int64_t b = 0; b < cols / 256; ++b) {
        const uint8_t* blk = src + b * bs;
        uint16_t dh, mh;
        std::memcpy(&dh, blk, 2);
        std::memcpy(&mh, blk + 2, 2);
        const double d = HalfToDouble(dh), dmin = HalfToDouble(mh);
        const uint8_t* scales = blk + 4;
        const uint8_t* qh = blk + 16;
        const uint8_t* ql = blk + (five ? 48 : 16);
        double* y = w + 256 * b;
        double* oy = off + 256 * b;
        int is = 0;
        for (int j = 0; j < 256; j += 64) {
          int sc, m;
          ScaleMin(is, scales, &sc, &m);
          const double d1 = d * sc, m1 = dmin * m;
          ScaleMin(is + 1, scales, &sc, &m);
          const double d2 = d * sc, m2 = dmin * m;
          for (int l = 0; l < 32; ++l) {
            const int h1 = five && (qh[l] >> is) & 1 ? 16 : 0;
            const int h2 = five && (qh[l] >> (is + 1)) & 1 ? 16 : 0;
            y[j + l] = d1 * ((ql[l] & 0xf) + h1) - m1;
            y[j + 32 + l] = d2 * ((ql[l] >> 4) + h2) - m2;
            oy[j + l] = m1;
            oy[j + 32 + l] = m2;
          }
          ql += 32;
          is += 2;
        }
      }
      return;
    }
    case GgmlType::kQ6_K: {
      for (int64_t b = 0; b < cols / 256; ++b) {
        const auto* blk = reinterpret_cast<const BlockQ6_K*>(src) + b;
        const double d = HalfToDouble(blk->d);
        const uint8_t* ql = blk->ql;
        const uint8_t* qh = blk->qh;
        const int8_t* sc = blk->scales;
        double* y = w + 256 * b;
        double* oy = off + 256 * b;
        for (int n = 0; n < 256; n += 128) {
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
            oy[l] = std::fabs(32 * d * sc[is]);
            oy[l + 32] = std::fabs(32 * d * sc[is + 2]);
            oy[l + 64] = std::fabs(32 * d * sc[is + 4]);
            oy[l + 96] = std::fabs(32 * d * sc[is + 6]);
          }
          y += 128;
          oy += 128;
          ql += 64;
          qh += 32;
          sc += 8;
        }
      }
      return;
    }
    default:
      return;
  }
}

// A GEMM problem and its checker, shared by gemm_test.cc and
// gemm_emulated_test.cc.
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
inline std::unique_ptr<uint8_t, AlignedFree> AlignedBytes(size_t n) {
  return std::unique_ptr<uint8_t, AlignedFree>(
      static_cast<uint8_t*>(std::aligned_alloc(64, (n + 64) / 64 * 64)));
}

// One problem: weights in `type`, their f64 dequantization, activations, and
// the f64 reference product with per-element error bounds.
struct Problem {
  // (see gemm_test.cc for how the bounds are derived)
  GgmlType type;
  int64_t m, n, k;
  std::vector<uint8_t> w_bytes;
  std::vector<float> x;       // m x k
  std::vector<double> ref;    // m x n
  std::vector<double> bound;  // m x n

  Problem(GgmlType t, int64_t m_, int64_t n_, int64_t k_, uint32_t seed)
      : type(t), m(m_), n(n_), k(k_) {
    std::mt19937 rng(seed);
    w_bytes = RandomWeights(type, n, k, rng);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    x.resize(m * k);
    for (float& v : x) v = normal(rng);
    for (int64_t i = 0; i < m; i += 3) x[i * k] *= 50.0f;  // an outlier per block row
    std::vector<double> w(n * k), off(n * k);
    std::vector<float> wf(k);
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* row = w_bytes.data() + j * RowBytes(type, k);
      RefDequantRow(type, row, k, &w[j * k], &off[j * k]);
      // The project's oracle (kernels/dequant.h) gives the weights; the
      // independent float64 decode above must agree with it to float rounding.
      DequantizeRow(type, row, wf.data(), k);
      for (int64_t e = 0; e < k; ++e) {
        const double tol =
            4 * std::ldexp(1.0, -24) * (std::fabs(w[j * k + e]) + 2 * off[j * k + e]);
        if (!(std::fabs(wf[e] - w[j * k + e]) <= tol)) {
          ADD_FAILURE() << GgmlTypeName(type) << " dequant disagrees at row " << j << " elem " << e
                        << ": " << wf[e] << " vs " << w[j * k + e];
          break;
        }
        w[j * k + e] = wf[e];
      }
    }
    const int S = PackGroupSize(PackKindOf(type));
    const bool requant =
        type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
    ref.resize(m * n);
    bound.resize(m * n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, act_err = 0, mag = 0, wq_err = 0;
        for (int64_t b = 0; b < k / 32; ++b) {
          double xmax = 0, wabs = 0, wmax = 0, xabs = 0;
          for (int e = 0; e < 32; ++e) {
            const int64_t kk = b * 32 + e;
            const double xv = x[i * k + kk], wv = w[j * k + kk];
            sum += xv * wv;
            xmax = std::max(xmax, std::fabs(xv));
            wabs += std::fabs(wv);
            wmax = std::max(wmax, std::fabs(wv));
            xabs += std::fabs(xv);
            mag += std::fabs(xv) * (std::fabs(wv) + 2 * off[j * k + kk]);
          }
          // Activation quantization: |x - s q| <= max|x_b| / 254 per element.
          act_err += xmax / 254.0 * wabs;
          // F32/F16/BF16 weights are requantized: |w - w'| <= max|w_b| / 254.
          if (requant) wq_err += wmax / 254.0 * (xabs + 32 * xmax / 254.0);
        }
        ref[i * n + j] = sum;
        // Float rounding: each group term and each accumulation step rounds
        // once relative to at most `mag` (codes times activations, with the
        // offset term counted twice), over K/S + 8 steps.
        const double round = (static_cast<double>(k / S) + 8) * std::ldexp(1.0, -23) * 1.01 * mag;
        bound[i * n + j] = act_err * 1.0001 + wq_err + round + 1e-30;
      }
    }
  }
};

inline std::string Where(const Problem& p, const char* label) {
  return std::string(label) + " " + GgmlTypeName(p.type) + " m=" + std::to_string(p.m) +
         " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k);
}

// Runs the GEMM for `row_ids` (all rows when empty): the listed rows of X
// are gathered into a compact X (QuantizeGatheredRows), so Y's row i is X's
// row row_ids[i]; checks each against the reference and the rows past them
// for being untouched.
inline void CheckGemm(const Problem& p, const GemmKernels& kernels, const char* label,
                      const std::vector<int32_t>& row_ids, int threads_for_tiling,
                      std::vector<float>* y_out = nullptr) {
  PackedMatrix w(p.type, p.w_bytes.data(), p.n, p.k);
  auto qbuf = AlignedBytes(QuantizedRowsBytes(p.m, p.k));
  const QuantizedRows xq = CarveQuantizedRows(qbuf.get(), p.m, p.k);
  const int64_t num_rows = row_ids.empty() ? p.m : static_cast<int64_t>(row_ids.size());
  if (row_ids.empty()) {
    QuantizeRows(p.x.data(), p.k, num_rows, xq);
  } else {
    QuantizeGatheredRows(p.x.data(), p.k, row_ids.data(), num_rows, xq);
  }
  const int64_t y_stride = p.n + 3;  // a padded stride catches stride mix-ups
  std::vector<float> y(p.m * y_stride, std::nanf(""));
  GemmArgs args;
  args.w = &w.view();
  args.x = &xq;
  args.y = y.data();
  args.y_stride = y_stride;
  args.num_rows = num_rows;
  if (threads_for_tiling == 0) {  // one tile: every row and panel in one kernel call
    kernels.tile[static_cast<int>(args.w->kind)](args, 0, num_rows, 0, args.w->num_panels());
  } else {
    const GemmTiling tiling = PlanGemmTiles(kernels, args, threads_for_tiling);
    for (int64_t t = tiling.num_tiles() - 1; t >= 0; --t) RunGemmTile(kernels, args, tiling, t);
  }

  int bad = 0;
  double worst = 0;
  int64_t worst_at = -1;
  for (int64_t i = 0; i < p.m; ++i) {
    const int64_t src = row_ids.empty() ? i : i < num_rows ? row_ids[i] : -1;  // X's row
    for (int64_t j = 0; j < y_stride; ++j) {
      const float v = y[i * y_stride + j];
      if (src < 0 || j >= p.n) {
        if (!std::isnan(v) && ++bad < 5)
          ADD_FAILURE() << Where(p, label) << " wrote y[" << i << "][" << j << "]";
        continue;
      }
      const double err = std::fabs(v - p.ref[src * p.n + j]);
      const double rel = err / p.bound[src * p.n + j];
      if (!(rel <= 1.0) && ++bad < 5) {
        ADD_FAILURE() << Where(p, label) << " y[" << i << "][" << j << "] = " << v << " want "
                      << p.ref[src * p.n + j] << " err " << err << " > bound "
                      << p.bound[src * p.n + j];
      }
      if (rel > worst) worst = rel, worst_at = src * p.n + j;
    }
  }
  EXPECT_EQ(bad, 0) << Where(p, label) << ": worst err/bound " << worst << " at " << worst_at;
  if (y_out) *y_out = y;
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_KERNELS_GEMM_TEST_UTIL_H_
