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
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void SwigluScalar(const float* g, const float* u, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void GegluScalar(const float* g, const float* u, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i];
    y[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCubic * x * x))) * u[i];
  }
}

void AddWeightedRowsScalar(const float* w, int64_t ldw, int64_t rows, const float* e, int64_t lde,
                           int64_t k, int64_t n, float* acc, int64_t ldacc) {
  for (int64_t r = 0; r < rows; ++r) {
    float* a = acc + r * ldacc;
    for (int64_t j = 0; j < n; ++j) {
      float s = a[j];
      for (int64_t i = 0; i < k; ++i) s += w[r * ldw + i] * e[i * lde + j];
      a[j] = s;
    }
  }
}

void AddScalar(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

}  // namespace

void FillScalarVectorKernels(VectorKernels* k) {
  k->rms_norm = RmsNormScalar;
  k->swiglu = SwigluScalar;
  k->geglu = GegluScalar;
  k->add = AddScalar;
  k->add_weighted_rows = AddWeightedRowsScalar;
}

}  // namespace vector_internal

const VectorKernels& SelectVectorKernels(IsaLevel level) {
  struct All {
    VectorKernels scalar, avx2[3];
    All() {
      vector_internal::FillScalarVectorKernels(&scalar);
      for (int l = 0; l < 3; ++l) {
        avx2[l].isa = static_cast<IsaLevel>(l + 1);
        // AVX-512 VNNI and AMX CPUs have AVX-512F.
        if (avx2[l].isa == IsaLevel::kAvx2) {
          vector_internal::FillAvx2VectorKernels(&avx2[l]);
        } else {
          vector_internal::FillAvx512VectorKernels(&avx2[l]);
        }
      }
    }
  };
  static const All all;
  return level == IsaLevel::kScalar ? all.scalar : all.avx2[static_cast<int>(level) - 1];
}

}  // namespace dllm
