// Vector kernels: each ISA level against float64 formulas, over sizes 0..2x
// the vector width plus odd and large sizes, at misaligned starts.
#include "kernels/vector_ops.h"

#include <cmath>
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
        EXPECT_NEAR(y[i + 1], want, 1e-5 * std::fabs(want) + 1e-30) << IsaLevelName(isa) << " n=" << n;
      }
      k.rms_norm(x.data() + 1, w.data() + 1, 1e-5f, n, x.data() + 1);  // in place
      for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(x[i + 1], y[i + 1]);
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
        EXPECT_NEAR(y[i], want, 1e-6 * std::fabs(want) + 1e-30) << IsaLevelName(isa) << " n=" << n << " i=" << i;
        EXPECT_EQ(s[i], g[i] + u[i]);
      }
    }
  }
}

TEST(VectorOpsTest, Softmax) {
  std::mt19937 rng(3);
  for (IsaLevel isa : SupportedIsaLevels()) {
    const VectorKernels& k = SelectVectorKernels(isa);
    for (int64_t n : kSizes) {
      std::vector<float> x = Random(n, rng, 10.0f);
      if (n > 2) x[2] = -INFINITY;  // a masked score
      std::vector<double> want(n);
      double mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(x[i + 1]));
      for (int64_t i = 0; i < n; ++i) sum += want[i] = std::exp(x[i + 1] - mx);
      const std::vector<float> in = x;
      k.softmax(x.data() + 1, n);
      for (int64_t i = 0; i < n; ++i) {
        // Rounding of x - max (relative 2^-24 |x - max| in exp), exp's own
        // error (< 3e-7) and the normalization.
        const double rel = std::isinf(in[i + 1]) ? 0.0 : 6e-8 * std::fabs(in[i + 1] - mx) + 1e-6;
        EXPECT_NEAR(x[i + 1], want[i] / sum, rel * want[i] / sum + 1e-37) << IsaLevelName(isa) << " n=" << n;
      }
    }
  }
}

TEST(VectorOpsTest, RopeBothLayouts) {
  std::mt19937 rng(4);
  const int64_t n_tokens = 3, n_head = 2, head_dim = 64, n_rot = 64;
  const int32_t pos[n_tokens] = {0, 7, 4095};
  for (IsaLevel isa : SupportedIsaLevels()) {
    for (RopeLayout layout : {RopeLayout::kNorm, RopeLayout::kNeox}) {
      std::vector<float> x = Random(n_tokens * n_head * head_dim, rng), y = x;
      SelectVectorKernels(isa).rope(y.data(), n_tokens, n_head, head_dim, n_rot, pos, 10000.0f, layout);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < n_head; ++h) {
          const float* in = x.data() + (t * n_head + h) * head_dim;
          const float* out = y.data() + (t * n_head + h) * head_dim;
          for (int64_t i = 0; i < n_rot / 2; ++i) {
            const double th = pos[t] * std::pow(10000.0, -2.0 * i / n_rot);
            const int64_t a = layout == RopeLayout::kNorm ? 2 * i : i;
            const int64_t b = layout == RopeLayout::kNorm ? 2 * i + 1 : i + n_rot / 2;
            EXPECT_NEAR(out[a], in[a] * std::cos(th) - in[b] * std::sin(th), 1e-5);
            EXPECT_NEAR(out[b], in[a] * std::sin(th) + in[b] * std::cos(th), 1e-5);
          }
        }
      }
      if (pos[0] == 0) {  // position 0 is the identity
        for (int64_t i = 0; i < n_head * head_dim; ++i) EXPECT_EQ(y[i], x[i]);
      }
    }
  }
}

}  // namespace
}  // namespace dllm
