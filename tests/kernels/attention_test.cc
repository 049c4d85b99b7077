// Every attention path the machine runs against a float64 softmax(QK^T)V.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dllm {
namespace {

struct Case {
  int n_tokens, n_head, n_head_kv, head_dim;
};

// Gaussian q, k and v for `s` (n_tokens rows at their strides).
struct Qkv {
  std::vector<float> q, k, v;
  Qkv(const AttentionShape& s, uint32_t seed)
      : q(static_cast<size_t>(s.n_tokens) * s.q_stride),
        k(static_cast<size_t>(s.n_tokens) * s.kv_stride),
        v(k.size()) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> gauss;
    for (auto* x : {&q, &k, &v}) {
      for (float& e : *x) e = gauss(rng);
    }
  }
};

// Reference output row for query row `qi`, head `h`, in float64.
// Over the keys [key_begin, key_end) (key_end -1: the whole canvas).
std::vector<double> Reference(const AttentionShape& s, const std::vector<float>& q,
                              const std::vector<float>& k, const std::vector<float>& v, int qi,
                              int h, int key_begin = 0, int key_end = -1) {
  const int d = s.head_dim, kvh = h / (s.n_head / s.n_head_kv);
  if (key_end < 0) key_end = s.n_tokens;
  std::vector<double> scores(s.n_tokens, -1e300);
  double m = -1e300;
  for (int j = key_begin; j < key_end; ++j) {
    double dot = 0;
    for (int c = 0; c < d; ++c) {
      dot += double(q[qi * s.q_stride + h * d + c]) * k[j * s.kv_stride + kvh * d + c];
    }
    scores[j] = dot * s.scale;
    m = std::max(m, scores[j]);
  }
  double sum = 0;
  for (double& x : scores) sum += (x = x == -1e300 ? 0.0 : std::exp(x - m));
  std::vector<double> out(d, 0.0);
  for (int j = 0; j < s.n_tokens; ++j) {
    for (int c = 0; c < d; ++c) out[c] += scores[j] / sum * v[j * s.kv_stride + kvh * d + c];
  }
  return out;
}

TEST(AttentionTest, EveryPathMatchesFloat64Reference) {
  // Ragged canvases (not multiples of either block), GQA and MHA.
  const Case cases[] = {
      {1, 2, 2, 16}, {37, 4, 2, 64}, {64, 4, 4, 32}, {130, 8, 2, 128}, {200, 4, 1, 64}};
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.5f);
  for (IsaLevel level : SupportedIsaLevels()) {
    const AttentionFn attend = SelectAttention(level);
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message() << IsaLevelName(level) << " L=" << c.n_tokens << " heads="
                                      << c.n_head << "/" << c.n_head_kv << " d=" << c.head_dim);
      AttentionShape s;
      s.n_tokens = c.n_tokens;
      s.n_head = c.n_head;
      s.n_head_kv = c.n_head_kv;
      s.head_dim = c.head_dim;
      s.q_stride = c.n_head * c.head_dim + 3;  // padded rows
      s.kv_stride = c.n_head_kv * c.head_dim + 5;
      s.out_stride = c.n_head * c.head_dim;
      s.scale = 1.0f / std::sqrt(float(c.head_dim));
      std::vector<float> q(size_t(c.n_tokens) * s.q_stride), k(size_t(c.n_tokens) * s.kv_stride),
          v(k.size());
      for (float& x : q) x = gauss(rng);
      for (float& x : k) x = gauss(rng);
      for (float& x : v) x = gauss(rng);
      std::vector<float> out(size_t(c.n_tokens) * s.out_stride, -1.0f);
      std::vector<float> scratch(AttentionScratchFloats(s));
      for (int h = 0; h < c.n_head; ++h) {
        for (int i0 = 0; i0 < c.n_tokens; i0 += kAttnQueryBlock) {
          const int i1 = std::min(c.n_tokens, i0 + kAttnQueryBlock);
          attend(s, q.data(), k.data(), v.data(), out.data(), h, i0, i1, nullptr, scratch.data());
        }
      }
      // float32 scores of |q.k| ~ d * 2.25 / sqrt(d) and a float32 weighted
      // sum of unit-scale values: 1e-4 absolute covers both with margin.
      double max_err = 0;
      for (int i = 0; i < c.n_tokens; ++i) {
        for (int h = 0; h < c.n_head; ++h) {
          const std::vector<double> ref = Reference(s, q, k, v, i, h);
          for (int d = 0; d < c.head_dim; ++d) {
            max_err =
                std::max(max_err, std::abs(ref[d] - out[i * s.out_stride + h * c.head_dim + d]));
          }
        }
      }
      EXPECT_LT(max_err, 1e-4);
    }
  }
}

// A query row's output is the same bits whatever rows share its block: the
// last layer attends for the logits rows only, compacted, and a batch
// stacks other sequences' rows beside it.
TEST(AttentionTest, CompactedQueryRowsMatchFullRows) {
  AttentionShape s{50, 2, 1, 32, 64, 32, 64, 0.2f};
  const Qkv in(s, 3);
  const std::vector<float>&q = in.q, &k = in.k, &v = in.v;
  const std::vector<int32_t> rows = {3, 17, 18, 49};
  std::vector<float> compact(rows.size() * 64);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy_n(q.begin() + rows[r] * 64, 64, compact.begin() + static_cast<int64_t>(r) * 64);
  }
  for (IsaLevel level : SupportedIsaLevels()) {
    const AttentionFn attend = SelectAttention(level);
    std::vector<float> full(50 * 64), picked(rows.size() * 64), scratch(AttentionScratchFloats(s));
    for (int h = 0; h < 2; ++h) {
      for (int i0 = 0; i0 < 50; i0 += kAttnQueryBlock) {
        attend(s, q.data(), k.data(), v.data(), full.data(), h, i0, std::min(50, i0 + 16), nullptr,
               scratch.data());
      }
      attend(s, compact.data(), k.data(), v.data(), picked.data(), h, 0, 4, nullptr,
             scratch.data());
    }
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int c = 0; c < 64; ++c) {
        EXPECT_EQ(picked[r * 64 + c], full[rows[r] * 64 + c]) << IsaLevelName(level);
      }
    }
  }
}

// A call over many query rows stages the head's K and V once and runs its
// 16-row blocks: every row gets the bits it gets from a call of its own
// block alone (the forward pass hands out kAttnRowsPerCall rows a task).
TEST(AttentionTest, OneCallOverManyRowsEqualsBlockByBlockCalls) {
  AttentionShape s{70, 4, 2, 32, 128, 64, 128, 0.17f};
  const Qkv in(s, 8);
  const std::vector<float>&q = in.q, &k = in.k, &v = in.v;
  for (IsaLevel level : SupportedIsaLevels()) {
    const AttentionFn attend = SelectAttention(level);
    std::vector<float> blocks(70 * 128), whole(70 * 128), scratch(AttentionScratchFloats(s));
    for (int h = 0; h < 4; ++h) {
      for (int i0 = 0; i0 < 70; i0 += kAttnQueryBlock) {
        attend(s, q.data(), k.data(), v.data(), blocks.data(), h, i0,
               std::min(70, i0 + kAttnQueryBlock), nullptr, scratch.data());
      }
      attend(s, q.data(), k.data(), v.data(), whole.data(), h, 0, 70, nullptr, scratch.data());
    }
    EXPECT_EQ(0, std::memcmp(blocks.data(), whole.data(), sizeof(float) * whole.size()))
        << IsaLevelName(level);
  }
}

// Per-row key ranges (the masks: causal rows, block-causal blocks, a
// sliding window) against the float64 softmax over exactly those keys, on
// every path; ranges that start past 0, end before the canvas, and differ
// within one 16-row block and across key blocks.
TEST(AttentionTest, RowKeyRangesMatchFloat64ReferenceOverThoseKeys) {
  AttentionShape s{150, 4, 2, 32, 128, 64, 128, 0.17f};
  const Qkv in(s, 11);
  struct Mask {
    const char* name;
    KeyRange (*keys)(int row, int n);
  };
  const Mask masks[] = {
      {"causal",
       [](int row, int) {
         return KeyRange{0, row + 1};
       }},
      {"block-causal 32",
       [](int row, int n) {
         return KeyRange{0, std::min(n, (row / 32 + 1) * 32)};
       }},
      {"window 20",
       [](int row, int n) {
         return KeyRange{std::max(0, row - 19), std::min(n, row + 20)};
       }},
      {"prompt 40 causal",
       [](int row, int n) {
         return KeyRange{0, row < 40 ? row + 1 : n};
       }},
  };
  for (IsaLevel level : SupportedIsaLevels()) {
    const AttentionFn attend = SelectAttention(level);
    for (const Mask& mask : masks) {
      SCOPED_TRACE(testing::Message() << IsaLevelName(level) << " " << mask.name);
      std::vector<KeyRange> ranges(150);
      for (int i = 0; i < 150; ++i) ranges[i] = mask.keys(i, 150);
      std::vector<float> out(150 * 128, -1.0f), scratch(AttentionScratchFloats(s));
      for (int h = 0; h < 4; ++h) {
        for (int i0 = 0; i0 < 150; i0 += kAttnRowsPerCall) {
          attend(s, in.q.data(), in.k.data(), in.v.data(), out.data(), h, i0,
                 std::min(150, i0 + kAttnRowsPerCall), ranges.data(), scratch.data());
        }
      }
      double max_err = 0;
      for (int i = 0; i < 150; ++i) {
        for (int h = 0; h < 4; ++h) {
          const std::vector<double> ref =
              Reference(s, in.q, in.k, in.v, i, h, ranges[i].begin, ranges[i].end);
          for (int c = 0; c < 32; ++c) {
            max_err = std::max(max_err, std::abs(ref[c] - out[i * 128 + h * 32 + c]));
          }
        }
      }
      EXPECT_LT(max_err, 1e-4);
    }
  }
}

// Ranges that are the whole canvas give the bits of no ranges at all, and
// a row whose range starts at 0 gets the bits of a canvas cut at its end
// (so a block-causal pass equals bidirectional passes over prefixes).
TEST(AttentionTest, FullRangesAreBitIdenticalAndPrefixRangesEqualACutCanvas) {
  AttentionShape s{150, 4, 2, 32, 128, 64, 128, 0.17f};
  const Qkv in(s, 12);
  for (IsaLevel level : SupportedIsaLevels()) {
    const AttentionFn attend = SelectAttention(level);
    std::vector<float> plain(150 * 128), ranged(150 * 128), cut(150 * 128),
        scratch(AttentionScratchFloats(s));
    std::vector<KeyRange> whole(150, KeyRange{0, 150}), prefix(150);
    for (int i = 0; i < 150; ++i) prefix[i] = {0, i < 100 ? 100 : 150};
    AttentionShape cut_shape = s;
    cut_shape.n_tokens = 100;
    for (int h = 0; h < 4; ++h) {
      attend(s, in.q.data(), in.k.data(), in.v.data(), plain.data(), h, 0, 150, nullptr,
             scratch.data());
      attend(s, in.q.data(), in.k.data(), in.v.data(), ranged.data(), h, 0, 150, whole.data(),
             scratch.data());
      attend(cut_shape, in.q.data(), in.k.data(), in.v.data(), cut.data(), h, 0, 100, nullptr,
             scratch.data());
    }
    EXPECT_EQ(0, std::memcmp(plain.data(), ranged.data(), sizeof(float) * plain.size()))
        << IsaLevelName(level);
    for (int h = 0; h < 4; ++h) {
      attend(s, in.q.data(), in.k.data(), in.v.data(), ranged.data(), h, 0, 150, prefix.data(),
             scratch.data());
    }
    EXPECT_EQ(0, std::memcmp(cut.data(), ranged.data(), sizeof(float) * 100 * 128))
        << IsaLevelName(level);
    EXPECT_EQ(0, std::memcmp(plain.data() + 100 * 128, ranged.data() + 100 * 128,
                             sizeof(float) * 50 * 128))
        << IsaLevelName(level);
  }
}

}  // namespace
}  // namespace dllm
