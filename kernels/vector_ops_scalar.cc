// Scalar vector kernels: the reference for vector_ops_avx2.cc, and RoPE.
#include <cmath>
#include <vector>

#include "kernels/vector_ops_internal.h"

namespace dllm {
namespace vector_internal {
namespace {

void RmsNormScalar(const float* x, const float* w, float eps, int64_t n, float* y) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

void SwigluScalar(const float* g, const float* u, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void SoftmaxScalar(float* x, int64_t n) {
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void AddScalar(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

}  // namespace

void RopeScalar(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot,
                const int32_t* pos, float theta_base, RopeLayout layout) {
  const int64_t half = n_rot / 2;
  constexpr int64_t kMaxHalf = 512;  // head_dim <= 1024; no allocation on the hot path
  double inv_freq[kMaxHalf];
  float cs[kMaxHalf], sn[kMaxHalf];
  for (int64_t i = 0; i < half && i < kMaxHalf; ++i) {
    inv_freq[i] = std::pow(static_cast<double>(theta_base), -2.0 * static_cast<double>(i) / n_rot);
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = pos[t] * inv_freq[i];
      cs[i] = static_cast<float>(std::cos(angle));
      sn[i] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < n_head; ++h) {
      float* v = x + (t * n_head + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = layout == RopeLayout::kNorm ? 2 * i : i;
        const int64_t b = layout == RopeLayout::kNorm ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[i] - x1 * sn[i];
        v[b] = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

void FillScalarVectorKernels(VectorKernels* k) {
  k->rms_norm = RmsNormScalar;
  k->rope = RopeScalar;
  k->swiglu = SwigluScalar;
  k->softmax = SoftmaxScalar;
  k->add = AddScalar;
}

}  // namespace vector_internal

const VectorKernels& SelectVectorKernels(IsaLevel level) {
  struct All {
    VectorKernels scalar, avx2[3];
    All() {
      vector_internal::FillScalarVectorKernels(&scalar);
      for (int l = 0; l < 3; ++l) {
        avx2[l].isa = static_cast<IsaLevel>(l + 1);
        vector_internal::FillAvx2VectorKernels(&avx2[l]);
      }
    }
  };
  static const All all;
  return level == IsaLevel::kScalar ? all.scalar : all.avx2[static_cast<int>(level) - 1];
}

}  // namespace dllm
