// GEMM tests: every ISA level this machine runs, every packable type, random
// shapes with ragged M and N, and the selected-rows mode, against a float64
// product of dequantized weights and unquantized activations.
#include "kernels/gemm.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu_features.h"
#include "kernels/quantize_act.h"
#include "kernels/quantized_matrix.h"
#include "tests/kernels/gemm_test_util.h"

namespace dllm {
namespace {

using testing::RandomWeights;
using testing::RefDequantRow;

const GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
                           GgmlType::kQ5_K, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                           GgmlType::kF16,  GgmlType::kBF16, GgmlType::kF32};

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
std::unique_ptr<uint8_t, AlignedFree> AlignedBytes(size_t n) {
  return std::unique_ptr<uint8_t, AlignedFree>(
      static_cast<uint8_t*>(std::aligned_alloc(64, (n + 64) / 64 * 64)));
}

// One problem: weights in `type`, their f64 dequantization, activations, and
// the f64 reference product with per-element error bounds.
struct Problem {
  GgmlType type;
  int64_t m, n, k;
  std::vector<uint8_t> w_bytes;
  std::vector<float> x;      // m x k
  std::vector<double> ref;   // m x n
  std::vector<double> bound; // m x n

  Problem(GgmlType t, int64_t m_, int64_t n_, int64_t k_, uint32_t seed)
      : type(t), m(m_), n(n_), k(k_) {
    std::mt19937 rng(seed);
    w_bytes = RandomWeights(type, n, k, rng);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    x.resize(m * k);
    for (float& v : x) v = normal(rng);
    for (int64_t i = 0; i < m; i += 3) x[i * k] *= 50.0f;  // an outlier per block row
    std::vector<double> w(n * k), off(n * k);
    for (int64_t j = 0; j < n; ++j) {
      RefDequantRow(type, w_bytes.data() + j * RowBytes(type, k), k, &w[j * k], &off[j * k]);
    }
    const int S = PackGroupSize(PackKindOf(type));
    const bool requant = type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
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

std::string Where(const Problem& p, IsaLevel isa) {
  return std::string(IsaLevelName(isa)) + " " + GgmlTypeName(p.type) + " m=" + std::to_string(p.m) +
         " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k);
}

// Runs the GEMM for `row_ids` (all rows when empty) and checks listed rows
// against the reference and unlisted rows for being untouched.
void CheckGemm(const Problem& p, IsaLevel isa, const std::vector<int32_t>& row_ids,
               int threads_for_tiling, std::vector<float>* y_out = nullptr) {
  PackedMatrix w(p.type, p.w_bytes.data(), p.n, p.k);
  auto qbuf = AlignedBytes(QuantizedRowsBytes(p.m, p.k));
  const QuantizedRows xq = CarveQuantizedRows(qbuf.get(), p.m, p.k);
  const int32_t* ids = row_ids.empty() ? nullptr : row_ids.data();
  const int64_t num_rows = row_ids.empty() ? p.m : static_cast<int64_t>(row_ids.size());
  QuantizeRows(p.x.data(), p.k, ids, num_rows, xq);
  const int64_t y_stride = p.n + 3;  // a padded stride catches stride mix-ups
  std::vector<float> y(p.m * y_stride, std::nanf(""));
  GemmArgs args;
  args.w = &w.view();
  args.x = &xq;
  args.y = y.data();
  args.y_stride = y_stride;
  args.row_ids = ids;
  args.num_rows = num_rows;
  const GemmKernels& kernels = SelectGemmKernels(isa);
  const GemmTiling tiling = PlanGemmTiles(args, threads_for_tiling);
  for (int64_t t = tiling.num_tiles() - 1; t >= 0; --t) RunGemmTile(kernels, args, tiling, t);

  std::vector<bool> listed(p.m, row_ids.empty());
  for (int32_t r : row_ids) listed[r] = true;
  int bad = 0;
  double worst = 0;
  int64_t worst_at = -1;
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < y_stride; ++j) {
      const float v = y[i * y_stride + j];
      if (!listed[i] || j >= p.n) {
        if (!std::isnan(v) && ++bad < 5) ADD_FAILURE() << Where(p, isa) << " wrote y[" << i << "][" << j << "]";
        continue;
      }
      const double err = std::fabs(v - p.ref[i * p.n + j]);
      const double rel = err / p.bound[i * p.n + j];
      if (!(rel <= 1.0) && ++bad < 5) {
        ADD_FAILURE() << Where(p, isa) << " y[" << i << "][" << j << "] = " << v << " want "
                      << p.ref[i * p.n + j] << " err " << err << " > bound " << p.bound[i * p.n + j];
      }
      if (rel > worst) worst = rel, worst_at = i * p.n + j;
    }
  }
  EXPECT_EQ(bad, 0) << Where(p, isa) << ": worst err/bound " << worst << " at " << worst_at;
  if (y_out) *y_out = y;
}

TEST(GemmTest, EveryIsaAndTypeMatchesFloat64Product) {
  std::mt19937 rng(1234);
  const int64_t ms[] = {1, 3, 17, 40};
  const int64_t ns[] = {1, 15, 16, 33, 50};
  for (GgmlType type : kTypes) {
    const int64_t kb = PackKMultiple(type);
    for (int trial = 0; trial < 4; ++trial) {
      const int64_t m = ms[trial % 4];
      const int64_t n = ns[(trial + rng() % 5) % 5];
      const int64_t k = kb * (1 + rng() % (kb == 32 ? 8 : 2));
      Problem p(type, m, n, k, static_cast<uint32_t>(rng()));
      std::vector<float> scalar_y;
      for (IsaLevel isa : SupportedIsaLevels()) {
        std::vector<float> y;
        CheckGemm(p, isa, {}, 1 + trial % 2, &y);
        if (isa == IsaLevel::kScalar) {
          scalar_y = y;
          continue;
        }
        // SIMD vs the scalar twin: both round differently only in float,
        // so they agree to a small fraction of the bound.
        for (int64_t i = 0; i < p.m; ++i) {
          for (int64_t j = 0; j < p.n; ++j) {
            const size_t at = i * (p.n + 3) + j;
            ASSERT_NEAR(y[at], scalar_y[at], 0.5 * p.bound[i * p.n + j] + 1e-6)
                << Where(p, isa) << " vs scalar at " << i << "," << j;
          }
        }
      }
    }
  }
}

TEST(GemmTest, SelectedRowsOnlyWriteThoseRows) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K, GgmlType::kQ4_0}) {
    Problem p(type, 37, 40, PackKMultiple(type) * 2, 99);
    const std::vector<int32_t> rows = {0, 5, 6, 19, 20, 21, 36};
    for (IsaLevel isa : SupportedIsaLevels()) CheckGemm(p, isa, rows, 2);
  }
}

TEST(GemmTest, TallShapesUseManyTiles) {
  // Larger M exercises full row blocks (16-row AMX tiles, 4-row VNNI blocks).
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    Problem p(type, 150, 70, 512, 7);
    for (IsaLevel isa : SupportedIsaLevels()) CheckGemm(p, isa, {}, 2);
  }
}

TEST(GemmTest, TilingGivesEachThreadSeveralTiles) {
  QuantizedMatrix w;
  w.kind = PackKind::kU4G32;
  w.rows = 4096;
  w.cols = 4096;
  GemmArgs args;
  args.w = &w;
  for (int64_t m : {1, 16, 144, 512, 4096}) {
    args.num_rows = m;
    const GemmTiling t = PlanGemmTiles(args, 2);
    EXPECT_GE(t.num_tiles(), 16) << m;
    EXPECT_GE(t.tile_rows * t.row_tiles, m);
    EXPECT_GE(t.tile_panels * t.panel_tiles, w.num_panels());
  }
}

TEST(QuantizeActTest, ErrorWithinHalfAScale) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int64_t m = 3, k = 96;
  std::vector<float> x(m * k);
  for (float& v : x) v = normal(rng);
  x[40] = 0;  // an all-zero block must give scale 0
  for (int j = 32; j < 64; ++j) x[j] = 0;
  auto buf = AlignedBytes(QuantizedRowsBytes(m, k));
  const QuantizedRows q = CarveQuantizedRows(buf.get(), m, k);
  QuantizeRows(x.data(), k, nullptr, m, q);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < k / 32; ++b) {
      const float s = q.row_scale(i)[b];
      int32_t sums[2] = {0, 0};
      for (int e = 0; e < 32; ++e) {
        const float xv = x[i * k + b * 32 + e];
        const int8_t qv = q.row_q(i)[b * 32 + e];
        EXPECT_GE(qv, -127);
        EXPECT_LE(std::fabs(xv - s * qv), s / 2 * 1.0001f + 1e-30f);
        sums[e / 16] += qv;
      }
      EXPECT_EQ(q.row_sum16(i)[2 * b], sums[0]);
      EXPECT_EQ(q.row_sum16(i)[2 * b + 1], sums[1]);
    }
  }
}

TEST(QuantizedMatrixTest, PackedSizeAndKinds) {
  EXPECT_EQ(PackKindOf(GgmlType::kQ4_K), PackKind::kU4G32);
  EXPECT_EQ(PackKindOf(GgmlType::kQ6_K), PackKind::kU8G16);
  EXPECT_EQ(PackKindOf(GgmlType::kQ8_0), PackKind::kU8G32);
  EXPECT_FALSE(PackSupported(GgmlType::kQ2_K));
  // 4-bit formats stay 4-bit: 16 x 32 codes in 256 bytes plus 128 of scales.
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_0, 16, 32), 384u);
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_K, 17, 256), 2u * 8 * 384);
}

}  // namespace
}  // namespace dllm
