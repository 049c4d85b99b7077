// The attention kernel body, written as plain loops that the compiler
// vectorises for each ISA translation unit (attention_{scalar,avx2,avx512}.cc
// compile it with their own -m flags). Include only from those files, inside
// an anonymous namespace.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/attention.h"

// exp(x) for x <= 0 (and a few positive ulps): 2^(x log2 e) split into an
// integer power set in the exponent bits and a degree-6 polynomial for the
// fraction. Branch-free so loops over it vectorise.
inline float FastExp(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float t = x * 1.44269504088896341f;
  const float n = std::floor(t);
  const float f = t - n;  // [0, 1)
  float p = 1.5353362e-4f;
  p = p * f + 1.3398874e-3f;
  p = p * f + 9.6180944e-3f;
  p = p * f + 5.5503406e-2f;
  p = p * f + 2.4022652e-1f;
  p = p * f + 6.9314720e-1f;
  p = p * f + 1.0f;
  int32_t bits;
  std::memcpy(&bits, &p, 4);
  bits += static_cast<int32_t>(n) << 23;
  float r;
  std::memcpy(&r, &bits, 4);
  return r;
}

void AttentionBlock(const dllm::AttentionShape& s, const float* q, const float* k, const float* v,
                    float* out, int head, int q_begin, int q_end, const int32_t* q_rows,
                    float* scratch) {
  using dllm::kAttnKeyBlock;
  using dllm::kAttnQueryBlock;
  const int d = s.head_dim;
  const int kv_head = head / (s.n_head / s.n_head_kv);
  const int nq = q_end - q_begin;
  float* scores = scratch;                                  // [nq][kAttnKeyBlock]
  float* acc = scores + kAttnQueryBlock * kAttnKeyBlock;    // [nq][d]
  float* row_max = acc + kAttnQueryBlock * d;               // [nq]
  float* row_sum = row_max + kAttnQueryBlock;               // [nq]
  float* kt = row_sum + kAttnQueryBlock;                    // [d][kAttnKeyBlock]
  for (int i = 0; i < nq; ++i) {
    row_max[i] = -std::numeric_limits<float>::infinity();
    row_sum[i] = 0.0f;
    for (int c = 0; c < d; ++c) acc[i * d + c] = 0.0f;
  }
  for (int j0 = 0; j0 < s.n_tokens; j0 += kAttnKeyBlock) {
    const int nk = s.n_tokens - j0 < kAttnKeyBlock ? s.n_tokens - j0 : kAttnKeyBlock;
    // Transpose the key block so scores are a column-wise FMA loop.
    for (int j = 0; j < nk; ++j) {
      const float* kr = k + static_cast<int64_t>(j0 + j) * s.kv_stride + kv_head * d;
      for (int c = 0; c < d; ++c) kt[c * kAttnKeyBlock + j] = kr[c];
    }
    for (int j = nk; j < kAttnKeyBlock; ++j) {
      for (int c = 0; c < d; ++c) kt[c * kAttnKeyBlock + j] = 0.0f;
    }
    for (int i = 0; i < nq; ++i) {
      const int qi = q_rows ? q_rows[q_begin + i] : q_begin + i;
      const float* qr = q + static_cast<int64_t>(qi) * s.q_stride + head * d;
      float* sr = scores + i * kAttnKeyBlock;
      for (int j = 0; j < kAttnKeyBlock; ++j) sr[j] = 0.0f;
      for (int c = 0; c < d; ++c) {
        const float qc = qr[c] * s.scale;
        const float* ktc = kt + c * kAttnKeyBlock;
        for (int j = 0; j < kAttnKeyBlock; ++j) sr[j] += qc * ktc[j];
      }
      float m = row_max[i];
      for (int j = 0; j < nk; ++j) m = sr[j] > m ? sr[j] : m;
      const float correction = FastExp(row_max[i] - m);
      float sum = 0.0f;
      for (int j = 0; j < nk; ++j) {
        sr[j] = FastExp(sr[j] - m);
        sum += sr[j];
      }
      row_sum[i] = row_sum[i] * correction + sum;
      row_max[i] = m;
      float* ar = acc + i * d;
      for (int c = 0; c < d; ++c) ar[c] *= correction;
      for (int j = 0; j < nk; ++j) {
        const float p = sr[j];
        const float* vr = v + static_cast<int64_t>(j0 + j) * s.kv_stride + kv_head * d;
        for (int c = 0; c < d; ++c) ar[c] += p * vr[c];
      }
    }
  }
  for (int i = 0; i < nq; ++i) {
    const float inv = 1.0f / row_sum[i];
    float* o = out + static_cast<int64_t>(q_begin + i) * s.out_stride + head * d;
    for (int c = 0; c < d; ++c) o[c] = acc[i * d + c] * inv;
  }
}
