// The attention kernel body, written once with GCC vector extensions and
// compiled per ISA (attention_{scalar,avx2,avx512}.cc, each with its own -m
// flags). Include only
// from those files, inside an anonymous namespace, after defining
// DLLM_ATTN_WIDTH (floats in one of the ISA's vector registers) and
// DLLM_ATTN_UNROLL (keys or output columns per inner loop: enough
// independent accumulators to cover the FMA latency without spilling).
//
// The 16 query rows of a call are the 16 lanes of a vector. Both products
// then run as broadcast-FMAs with no transpose of K, V or P, and the online
// softmax (running max, normaliser, correction) is one vector op per key for
// all 16 rows:
//   scores:  S^T[j] = sum_c Q^T[c] * k_j[c]       (Q^T staged once per call)
//   output:  O^T[c] = corr * O^T[c] + sum_j P^T[j] * v_j[c]
// Each inner loop issues kParts vector loads and kUnroll broadcast loads per
// kUnroll x kParts FMAs, so it runs near the FMA ports' limit.
// Every lane's arithmetic is its own: a row's result does not depend on
// which rows share its call (AttentionTest.SelectedQueryRowsMatchFullRows).
// (The including file includes <algorithm>, <cstdint>, <cstring>, <limits>
// and kernels/attention.h before opening its namespace.)

// Helpers take and return vectors; they are internal and always inlined, so
// the ABI note GCC gives for some vector widths does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#define DLLM_ATTN_INLINE __attribute__((always_inline)) inline

// A call's 16 query rows are kParts native vectors of kWidth floats (GCC
// keeps vectors wider than the ISA's registers in memory, so each TU names
// its own width: 16 for AVX-512, 8 for AVX2, 4 for SSE2).
constexpr int kLanes = 16;
static_assert(dllm::kAttnQueryBlock == kLanes);
constexpr int kWidth = DLLM_ATTN_WIDTH;
constexpr int kParts = kLanes / kWidth;
constexpr int kUnroll = DLLM_ATTN_UNROLL;
typedef float Vec __attribute__((vector_size(4 * kWidth)));
typedef int32_t VecInts __attribute__((vector_size(4 * kWidth)));

DLLM_ATTN_INLINE Vec Splat(float x) { return Vec{} + x; }
DLLM_ATTN_INLINE Vec Load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
DLLM_ATTN_INLINE void Store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
DLLM_ATTN_INLINE Vec Max(Vec a, Vec b) { return a > b ? a : b; }

// exp(x) for x <= 0 (and a few positive ulps): 2^(x log2 e) split into an
// integer power set in the exponent bits and a degree-6 polynomial for the
// fraction (accurate to ~2 ulp over the range softmax needs).
DLLM_ATTN_INLINE Vec Exp(Vec x) {
  x = Max(x, Splat(-87.0f));
  const Vec t = x * 1.44269504088896341f;
  Vec n = __builtin_convertvector(__builtin_convertvector(t, VecInts), Vec);  // trunc
  n = n > t ? n - 1.0f : n;                                                   // floor
  const Vec f = t - n;                                                        // [0, 1)
  Vec p = Splat(1.5353362e-4f);
  p = p * f + 1.3398874e-3f;
  p = p * f + 9.6180944e-3f;
  p = p * f + 5.5503406e-2f;
  p = p * f + 2.4022652e-1f;
  p = p * f + 6.9314720e-1f;
  p = p * f + 1.0f;
  VecInts bits;
  std::memcpy(&bits, &p, sizeof bits);
  bits += __builtin_convertvector(n, VecInts) << 23;
  Vec r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

// pt[j] = sum_c qt[c] * k_j[c] for the nk keys at `k` (row stride `ks`).
DLLM_ATTN_INLINE void Scores(const float* qt, const float* k, int64_t ks, int nk, int d,
                             float* pt) {
  int j = 0;
  for (; j + kUnroll <= nk; j += kUnroll) {
    const float* kr = k + j * ks;
    Vec a[kUnroll][kParts];
#pragma GCC unroll 16
    for (int u = 0; u < kUnroll; ++u) {
#pragma GCC unroll 4
      for (int h = 0; h < kParts; ++h) a[u][h] = Vec{};
    }
    for (int c = 0; c < d; ++c) {
      Vec qc[kParts];
#pragma GCC unroll 4
      for (int h = 0; h < kParts; ++h) qc[h] = Load(qt + kLanes * c + kWidth * h);
#pragma GCC unroll 16
      for (int u = 0; u < kUnroll; ++u) {
        const float kv = kr[u * ks + c];
#pragma GCC unroll 4
        for (int h = 0; h < kParts; ++h) a[u][h] += qc[h] * kv;
      }
    }
#pragma GCC unroll 16
    for (int u = 0; u < kUnroll; ++u) {
#pragma GCC unroll 4
      for (int h = 0; h < kParts; ++h) Store(pt + kLanes * (j + u) + kWidth * h, a[u][h]);
    }
  }
  for (; j < nk; ++j) {
    const float* kr = k + j * ks;
    Vec a[kParts] = {};
    for (int c = 0; c < d; ++c) {
#pragma GCC unroll 4
      for (int h = 0; h < kParts; ++h) a[h] += Load(qt + kLanes * c + kWidth * h) * kr[c];
    }
#pragma GCC unroll 4
    for (int h = 0; h < kParts; ++h) Store(pt + kLanes * j + kWidth * h, a[h]);
  }
}

// ot[c] = corr * ot[c] + sum_j pt[j] * v_j[c] for the nk values at `v`.
DLLM_ATTN_INLINE void Accumulate(const float* pt, const float* v, int64_t vs, int nk, int d,
                                 const Vec* corr, float* ot) {
  int c = 0;
  for (; c + kUnroll <= d; c += kUnroll) {
    float* o = ot + kLanes * c;
    Vec a[kUnroll][kParts];
#pragma GCC unroll 16
    for (int u = 0; u < kUnroll; ++u) {
#pragma GCC unroll 4
      for (int h = 0; h < kParts; ++h) a[u][h] = Load(o + kLanes * u + kWidth * h) * corr[h];
    }
    for (int j = 0; j < nk; ++j) {
      Vec p[kParts];
#pragma GCC unroll 4
      for (int h = 0; h < kParts; ++h) p[h] = Load(pt + kLanes * j + kWidth * h);
      const float* vr = v + j * vs + c;
#pragma GCC unroll 16
      for (int u = 0; u < kUnroll; ++u) {
        const float vv = vr[u];
#pragma GCC unroll 4
        for (int h = 0; h < kParts; ++h) a[u][h] += p[h] * vv;
      }
    }
#pragma GCC unroll 16
    for (int u = 0; u < kUnroll; ++u) {
#pragma GCC unroll 4
      for (int h = 0; h < kParts; ++h) Store(o + kLanes * u + kWidth * h, a[u][h]);
    }
  }
  for (; c < d; ++c) {
    float* o = ot + kLanes * c;
#pragma GCC unroll 4
    for (int h = 0; h < kParts; ++h) {
      Vec a = Load(o + kWidth * h) * corr[h];
      for (int j = 0; j < nk; ++j) a += Load(pt + kLanes * j + kWidth * h) * v[j * vs + c];
      Store(o + kWidth * h, a);
    }
  }
}

// The online softmax over one block of nk scores in pt (kParts vectors a
// key): folds them into each lane's running max and normaliser, leaves
// their weights in pt and the correction of the earlier blocks in corr.
// Masked: key j0 + j counts for a lane only inside [lo, hi) (its weight is
// 0 and it leaves the max alone); a lane with no key yet keeps a zero
// accumulator whatever its correction.
template <bool kMasked>
DLLM_ATTN_INLINE void Softmax(float* pt, int nk, int j0, const VecInts* lo, const VecInts* hi,
                              Vec* row_max, Vec* row_sum, Vec* corr) {
  for (int h = 0; h < kParts; ++h) {
    Vec m = row_max[h];
    for (int j = 0; j < nk; ++j) {
      const Vec score = Load(pt + kLanes * j + kWidth * h);
      if constexpr (kMasked) {
        const VecInts key = VecInts{} + (j0 + j);
        const Vec neg_inf = Splat(-std::numeric_limits<float>::infinity());
        m = Max(m, (key >= lo[h]) & (key < hi[h]) ? score : neg_inf);
      } else {
        m = Max(m, score);
      }
    }
    corr[h] = Exp(row_max[h] - m);
    Vec sum{};
    for (int j = 0; j < nk; ++j) {
      float* pj = pt + kLanes * j + kWidth * h;
      Vec p = Exp(Load(pj) - m);
      if constexpr (kMasked) {
        const VecInts key = VecInts{} + (j0 + j);
        p = (key >= lo[h]) & (key < hi[h]) ? p : Vec{};
      }
      Store(pj, p);
      sum += p;
    }
    row_sum[h] = row_sum[h] * corr[h] + sum;
    row_max[h] = m;
  }
}

// One block of up to kLanes query rows against the head's K and V staged
// at kb / vb (rows [staged_begin, ...) of the canvas, d floats each,
// contiguous): over every key, or each row over its own range.
DLLM_ATTN_INLINE void QueryBlock(const dllm::AttentionShape& s, const float* q, const float* kb,
                                 const float* vb, int staged_begin, float* out, int head,
                                 int q_begin, int q_end, const dllm::KeyRange* row_keys, float* qt,
                                 float* ot, float* pt) {
  using dllm::kAttnKeyBlock;
  const int d = s.head_dim;
  const int nq = q_end - q_begin;
  for (int i = 0; i < kLanes; ++i) {
    if (i < nq) {
      const int qi = q_begin + i;
      const float* qr = q + static_cast<int64_t>(qi) * s.q_stride + head * d;
      for (int c = 0; c < d; ++c) qt[kLanes * c + i] = qr[c] * s.scale;
    } else {
      for (int c = 0; c < d; ++c) qt[kLanes * c + i] = 0.0f;
    }
  }
  std::memset(ot, 0, sizeof(float) * kLanes * d);
  Vec row_max[kParts], row_sum[kParts];
  for (int h = 0; h < kParts; ++h) {
    row_max[h] = Splat(-std::numeric_limits<float>::infinity());
    row_sum[h] = Vec{};
  }
  // The keys the block reads: all, or the union of its rows' ranges (the
  // padding lanes take the union, so they mask nothing).
  int first = 0, last = s.n_tokens;
  alignas(64) int32_t lo_lanes[kLanes], hi_lanes[kLanes];
  if (row_keys != nullptr) {
    first = row_keys[q_begin].begin, last = row_keys[q_begin].end;
    for (int i = 1; i < nq; ++i) {
      first = std::min(first, row_keys[q_begin + i].begin);
      last = std::max(last, row_keys[q_begin + i].end);
    }
    for (int i = 0; i < kLanes; ++i) {
      lo_lanes[i] = i < nq ? row_keys[q_begin + i].begin : first;
      hi_lanes[i] = i < nq ? row_keys[q_begin + i].end : last;
    }
  }
  VecInts lo[kParts] = {}, hi[kParts] = {};
  int widest_lo = first, narrowest_hi = last;  // keys every lane reads: [widest_lo, narrowest_hi)
  if (row_keys != nullptr) {
    for (int h = 0; h < kParts; ++h) {
      std::memcpy(&lo[h], lo_lanes + kWidth * h, sizeof lo[h]);
      std::memcpy(&hi[h], hi_lanes + kWidth * h, sizeof hi[h]);
    }
    for (int i = 0; i < kLanes; ++i) {
      widest_lo = std::max(widest_lo, lo_lanes[i]);
      narrowest_hi = std::min(narrowest_hi, hi_lanes[i]);
    }
  }
  for (int j0 = first; j0 < last; j0 += kAttnKeyBlock) {
    const int nk = std::min(kAttnKeyBlock, last - j0);
    const int64_t staged = static_cast<int64_t>(j0 - staged_begin) * d;
    Scores(qt, kb + staged, d, nk, d, pt);
    Vec corr[kParts];
    if (j0 >= widest_lo && j0 + nk <= narrowest_hi) {
      Softmax<false>(pt, nk, j0, lo, hi, row_max, row_sum, corr);
    } else {
      Softmax<true>(pt, nk, j0, lo, hi, row_max, row_sum, corr);
    }
    Accumulate(pt, vb + staged, d, nk, d, corr, ot);
  }

  alignas(64) float inv[kLanes];
  for (int h = 0; h < kParts; ++h) Store(inv + kWidth * h, 1.0f / row_sum[h]);
  for (int i = 0; i < nq; ++i) {
    float* o = out + static_cast<int64_t>(q_begin + i) * s.out_stride + head * d;
    for (int c = 0; c < d; ++c) o[c] = ot[kLanes * c + i] * inv[i];
  }
}

void AttentionBlock(const dllm::AttentionShape& s, const float* q, const float* k, const float* v,
                    float* out, int head, int q_begin, int q_end, const dllm::KeyRange* row_keys,
                    float* scratch) {
  const int d = s.head_dim;
  const int kv_head = head / (s.n_head / s.n_head_kv);
  // Scratch (AttentionScratchFloats): Q^T [d][16], O^T [d][16], P^T
  // [kAttnKeyBlock][16], then the head's K and V rows [n_tokens][d] each,
  // copied together once per call for all its query blocks: in the canvas
  // they lie a whole row of heads apart (16 KB at 32 x 128), and at that
  // power-of-two stride one head's rows share a few cache sets and evict
  // each other. With row ranges only the union of the call's ranges is
  // staged.
  float* qt =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* ot = qt + kLanes * d;
  float* pt = ot + kLanes * d;
  float* kb = pt + kLanes * dllm::kAttnKeyBlock;
  float* vb = kb + static_cast<int64_t>(s.n_tokens) * d;
  int first = 0, last = s.n_tokens;
  if (row_keys != nullptr) {
    first = row_keys[q_begin].begin, last = row_keys[q_begin].end;
    for (int i = q_begin + 1; i < q_end; ++i) {
      first = std::min(first, row_keys[i].begin);
      last = std::max(last, row_keys[i].end);
    }
  }
  const float* kh = k + kv_head * d;
  const float* vh = v + kv_head * d;
  for (int j = first; j < last; ++j) {
    const int64_t row = static_cast<int64_t>(j) * s.kv_stride;
    const int64_t staged = static_cast<int64_t>(j - first) * d;
    std::memcpy(kb + staged, kh + row, sizeof(float) * d);
    std::memcpy(vb + staged, vh + row, sizeof(float) * d);
  }
  for (int i0 = q_begin; i0 < q_end; i0 += kLanes) {
    QueryBlock(s, q, kb, vb, first, out, head, i0, std::min(q_end, i0 + kLanes), row_keys, qt, ot,
               pt);
  }
}
