// Vector kernels: each ISA level against float64 formulas, over sizes 0..2x
// the vector width plus odd and large sizes, at misaligned starts.
#include "kernels/vector_ops.h"

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dllm {
namespace {

const int64_t kSizes[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 4096};

std::vector<float> Random(int64_t n, std::mt19937& rng, float sd = 2.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n + 1);  // +1: callers use data() + 1 for a misaligned start
  for (float& x : v) x = d(rng);
  return v;
}

TEST(VectorOpsTest, RmsNorm) {
  std::mt19937 rng(1);
  for (IsaLevel isa : SupportedIsaLevels()) {
    const VectorKernels& k = SelectVectorKernels(isa);
    for (int64_t n : kSizes) {
      std::vector<float> x = Random(n, rng), w = Random(n, rng), y(n + 1);
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(x[i + 1]) * x[i + 1];
      const double r = 1.0 / std::sqrt(ss / n + 1e-5);
      k.rms_norm(x.data() + 1, w.data() + 1, 1e-5f, n, y.data() + 1);
      for (int64_t i = 0; i < n; ++i) {
        const double want = x[i + 1] * r * w[i + 1];
        // A few float roundings of the product plus the sum of squares.
        EXPECT_NEAR(y[i + 1], want, 1e-5 * std::fabs(want) + 1e-30)
            << IsaLevelName(isa) << " n=" << n;
      }
      k.rms_norm(x.data() + 1, w.data() + 1, 1e-5f, n, x.data() + 1);  // in place
      for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(x[i + 1], y[i + 1]);
    }
  }
}

TEST(VectorOpsTest, RmsNormWithoutWeight) {
  std::mt19937 rng(3);
  for (IsaLevel isa : SupportedIsaLevels()) {
    const VectorKernels& k = SelectVectorKernels(isa);
    for (int64_t n : kSizes) {
      std::vector<float> x = Random(n, rng), y(n + 1);
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(x[i + 1]) * x[i + 1];
      const double r = 1.0 / std::sqrt(ss / n + 1e-6);
      k.rms_norm(x.data() + 1, nullptr, 1e-6f, n, y.data() + 1);
      for (int64_t i = 0; i < n; ++i) {
        const double want = x[i + 1] * r;
        EXPECT_NEAR(y[i + 1], want, 1e-5 * std::fabs(want) + 1e-30)
            << IsaLevelName(isa) << " n=" << n;
      }
    }
  }
}

TEST(VectorOpsTest, Geglu) {
  std::mt19937 rng(4);
  for (IsaLevel isa : SupportedIsaLevels()) {
    const VectorKernels& k = SelectVectorKernels(isa);
    for (int64_t n : kSizes) {
      std::vector<float> g = Random(n, rng, 4.0f), u = Random(n, rng), y(n + 1);
      g[1] = -100.0f;  // tanh saturates: 0 and x, never NaN
      if (n > 1) g[2] = 100.0f;
      k.geglu(g.data() + 1, u.data() + 1, n, y.data() + 1);
      for (int64_t i = 1; i <= n; ++i) {
        const double x = g[i];
        const double want =
            0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
        // exp's relative error through tanh's 1 - 2 / (e + 1) (absolute
        // near tanh = -1, where gelu is tiny) and a few roundings.
        EXPECT_NEAR(y[i], want, 2e-6 * std::fabs(want) + 2e-6 * std::fabs(x * u[i]) + 1e-30)
            << IsaLevelName(isa) << " n=" << n << " i=" << i;
      }
    }
  }
}

// acc += w . e for a block of rows, against float64; each row's bits do
// not depend on how many rows one call takes (the AVX-512 kernel blocks
// four rows and 64 columns, 9 rows leave one over); and the FMA kernels
// (AVX2, AVX-512) give the same bits.
TEST(VectorOpsTest, AddWeightedRows) {
  std::mt19937 rng(5);
  std::map<std::pair<int64_t, int64_t>, std::vector<float>> fma_result;  // by (n, k)
  for (IsaLevel isa : SupportedIsaLevels()) {
    const VectorKernels& vk = SelectVectorKernels(isa);
    for (int64_t n : kSizes) {
      for (int64_t k : {1, 3, 16}) {
        std::mt19937 inputs(static_cast<unsigned>(n * 31 + k));
        const int64_t rows = 9, lde = n + 3, ldacc = n + 1, ldw = k + 2;
        std::vector<float> w = Random(rows * ldw, inputs, 0.3f), e = Random(k * lde, inputs);
        std::vector<float> acc = Random(rows * ldacc, inputs), one = acc;
        vk.add_weighted_rows(w.data(), ldw, rows, e.data(), lde, k, n, acc.data(), ldacc);
        for (int64_t r = 0; r < rows; ++r) {
          vk.add_weighted_rows(w.data() + r * ldw, ldw, 1, e.data(), lde, k, n,
                               one.data() + r * ldacc, ldacc);
        }
        EXPECT_EQ(acc, one) << IsaLevelName(isa) << " n=" << n << " k=" << k;
        if (isa != IsaLevel::kScalar) {
          const auto [it, first] = fma_result.emplace(std::pair{n, k}, acc);
          if (!first) EXPECT_EQ(acc, it->second) << IsaLevelName(isa) << " n=" << n << " k=" << k;
        }
        std::vector<float> start = Random(rows * ldacc, rng);
        std::vector<float> again = start;
        vk.add_weighted_rows(w.data(), ldw, rows, e.data(), lde, k, n, again.data(), ldacc);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            double want = start[r * ldacc + j], mag = std::fabs(want);
            for (int64_t i = 0; i < k; ++i) {
              want += double(w[r * ldw + i]) * e[i * lde + j];
              mag += std::fabs(double(w[r * ldw + i]) * e[i * lde + j]);
            }
            EXPECT_NEAR(again[r * ldacc + j], want, 1e-6 * mag * (k + 1))
                << IsaLevelName(isa) << " n=" << n << " k=" << k;
          }
        }
      }
    }
  }
}

TEST(VectorOpsTest, SwigluAndAdd) {
  std::mt19937 rng(2);
  for (IsaLevel isa : SupportedIsaLevels()) {
    const VectorKernels& k = SelectVectorKernels(isa);
    for (int64_t n : kSizes) {
      std::vector<float> g = Random(n, rng, 6.0f), u = Random(n, rng), y(n + 1), s(n + 1);
      g[1] = -100.0f;  // exp overflow side must give 0, not NaN
      if (n > 1) g[2] = 100.0f;
      k.swiglu(g.data() + 1, u.data() + 1, n, y.data() + 1);
      k.add(g.data() + 1, u.data() + 1, n, s.data() + 1);
      for (int64_t i = 1; i <= n; ++i) {
        const double want = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
        // exp's relative error (< 3e-7) and 3 roundings.
        EXPECT_NEAR(y[i], want, 1e-6 * std::fabs(want) + 1e-30)
            << IsaLevelName(isa) << " n=" << n << " i=" << i;
        EXPECT_EQ(s[i], g[i] + u[i]);
      }
    }
  }
}

}  // namespace
}  // namespace dllm
