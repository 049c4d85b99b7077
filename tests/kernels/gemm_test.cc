// GEMM tests: every ISA level this machine runs, every packable type, random
// shapes with ragged M and N, and gathered rows, against a float64
// product of dequantized weights and unquantized activations.
#include "kernels/gemm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
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

using testing::AlignedBytes;
using testing::Problem;
using testing::Where;

// Every table this CPU runs: each level's, and plain AVX2 beside AVX-VNNI.
void CheckGemm(const Problem& p, const NamedGemmKernels& isa, const std::vector<int32_t>& row_ids,
               int threads, std::vector<float>* y = nullptr) {
  testing::CheckGemm(p, *isa.kernels, isa.name, row_ids, threads, y);
}

const GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
                           GgmlType::kQ5_K, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                           GgmlType::kF16,  GgmlType::kBF16, GgmlType::kF32};

TEST(GemmTest, EveryIsaAndTypeMatchesFloat64Product) {
  std::mt19937 rng(1234);
  // Row tails 1, 3, 2 and none of the 4-row blocks; panel tails of 1, 2
  // and 3 panels of the 3-panel blocks (and a ragged last panel).
  const int64_t ms[] = {1, 3, 18, 40};
  const int64_t ns[] = {1, 15, 20, 33, 50, 80};
  for (GgmlType type : kTypes) {
    const int64_t kb = PackKMultiple(type);
    for (int trial = 0; trial < 4; ++trial) {
      const int64_t m = ms[trial % 4];
      const int64_t n = ns[(trial + rng() % 6) % 6];
      const int64_t k = kb * (1 + rng() % (kb == 32 ? 8 : 2));
      Problem p(type, m, n, k, static_cast<uint32_t>(rng()));
      std::vector<float> scalar_y;
      for (const NamedGemmKernels& isa : RunnableGemmKernels()) {
        std::vector<float> y;
        CheckGemm(p, isa, {}, 1 + trial % 2, &y);
        if (isa.kernels->isa == IsaLevel::kScalar) {
          scalar_y = y;
          continue;
        }
        // SIMD vs the scalar twin: both round differently only in float,
        // so they agree to a small fraction of the bound.
        for (int64_t i = 0; i < p.m; ++i) {
          for (int64_t j = 0; j < p.n; ++j) {
            const size_t at = i * (p.n + 3) + j;
            ASSERT_NEAR(y[at], scalar_y[at], 0.5 * p.bound[i * p.n + j] + 1e-6)
                << Where(p, isa.name) << " vs scalar at " << i << "," << j;
          }
        }
      }
    }
  }
}

// Rows gathered into a compact X (the last layer's logits rows, an expert's
// rows) match those rows of the reference product, and nothing past them is
// written.
TEST(GemmTest, GatheredRowsMatchTheirRowsOfTheWholeProduct) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K, GgmlType::kQ4_0}) {
    Problem p(type, 37, 40, PackKMultiple(type) * 2, 99);
    const std::vector<int32_t> rows = {0, 5, 6, 19, 20, 21, 36};
    for (const NamedGemmKernels& isa : RunnableGemmKernels()) {
      CheckGemm(p, isa, rows, 2);
      CheckGemm(p, isa, rows, 0);
    }
  }
}

// Batching rests on this: a row's result depends only on its own
// activations, never on how many rows share the call, where it sits in its
// register block or tile, or how many threads split the work. Every bit of
// every row computed inside gathered subsets of different sizes, positions
// and thread counts equals the same row of the whole product. K spans
// several weight chunks, with a ragged last one for the 32-element formats.
TEST(GemmTest, EachRowsBitsDoNotDependOnMTilingOrThreads) {
  std::mt19937 rng(77);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kQ4_0,
                        GgmlType::kQ4_1, GgmlType::kQ5_K}) {
    const int64_t k = PackKMultiple(type) == 256 ? 1280 : 1312;
    Problem p(type, 40, 70, k, static_cast<uint32_t>(rng()));
    for (const NamedGemmKernels& isa : RunnableGemmKernels()) {
      std::vector<float> whole;
      CheckGemm(p, isa, {}, 2, &whole);
      const int64_t stride = p.n + 3;
      for (const int64_t m : {1, 2, 3, 4, 5, 6, 13, 39}) {
        std::vector<int32_t> rows(p.m);
        for (int i = 0; i < p.m; ++i) rows[i] = i;
        std::shuffle(rows.begin(), rows.end(), rng);
        rows.resize(m);
        for (const int threads : {0, 1, 3}) {
          std::vector<float> part;
          CheckGemm(p, isa, rows, threads, &part);
          for (int64_t i = 0; i < m; ++i) {
            ASSERT_EQ(0, std::memcmp(part.data() + i * stride, whole.data() + rows[i] * stride,
                                     sizeof(float) * p.n))
                << Where(p, isa.name) << ": row " << rows[i] << " as row " << i << " of " << m
                << ", threads " << threads;
          }
        }
      }
    }
  }
}

// The register-blocked tables (AVX-512 VNNI, AVX-VNNI, plain AVX2) share
// one tile driver and one float epilogue, and their integer dots are exact,
// so they agree bit for bit: two independent SIMD implementations checking
// each other. Plain AVX2 recentres 8-bit codes and restores the offset in
// float, so on 8-bit formats with free offsets it rounds differently.
TEST(GemmTest, RegisterBlockedTablesAgreeBitForBit) {
  std::vector<NamedGemmKernels> tables;  // the reference first: any but plain AVX2
  for (const NamedGemmKernels& t : RunnableGemmKernels()) {
    if (t.kernels->isa != IsaLevel::kAvx2 && t.kernels->isa != IsaLevel::kAvx512Vnni) continue;
    tables.insert(std::string(t.name) == "avx2" ? tables.end() : tables.begin(), t);
  }
  if (tables.size() < 2) GTEST_SKIP() << "one register-blocked table on this CPU";
  std::mt19937 rng(91);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ4_0, GgmlType::kQ4_1,
                        GgmlType::kQ8_0, GgmlType::kQ5_K, GgmlType::kF16}) {
    Problem p(type, 23, 70, PackKMultiple(type) == 256 ? 768 : 800, static_cast<uint32_t>(rng()));
    std::vector<float> first;
    CheckGemm(p, tables[0], {}, 2, &first);
    for (size_t i = 1; i < tables.size(); ++i) {
      const bool free_offset_bytes =
          PackCodeBits(PackKindOf(type)) == 8 && PackOffsetShift(type) < 0;
      if (std::string(tables[i].name) == "avx2" && free_offset_bytes) continue;
      std::vector<float> y;
      CheckGemm(p, tables[i], {}, 1, &y);
      for (int64_t r = 0; r < p.m; ++r) {
        ASSERT_EQ(0, std::memcmp(y.data() + r * (p.n + 3), first.data() + r * (p.n + 3),
                                 sizeof(float) * p.n))
            << Where(p, tables[i].name) << " vs " << tables[0].name << " row " << r;
      }
    }
  }
}

TEST(GemmTest, TallShapesUseManyTiles) {
  // Larger M exercises full row blocks (16-row AMX tiles, 4-row VNNI blocks).
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    Problem p(type, 150, 70, 512, 7);
    for (const NamedGemmKernels& isa : RunnableGemmKernels()) {
      CheckGemm(p, isa, {}, 2);
      CheckGemm(p, isa, {}, 0);  // the whole product as one tile
    }
  }
}

TEST(GemmTest, TilingGivesEachThreadSeveralTilesOfWholeRegisterBlocks) {
  QuantizedMatrix w;
  w.kind = PackKind::kU4K;
  w.rows = 4096;
  w.cols = 4096;
  GemmArgs args;
  args.w = &w;
  for (const NamedGemmKernels& isa : RunnableGemmKernels()) {
    const GemmKernels& kernels = *isa.kernels;
    for (int64_t m : {1, 16, 144, 512, 4096}) {
      args.num_rows = m;
      const GemmTiling t = PlanGemmTiles(kernels, args, 2);
      EXPECT_GE(t.num_tiles(), 16) << m;
      EXPECT_GE(t.tile_rows * t.row_tiles, m);
      EXPECT_GE(t.tile_panels * t.panel_tiles, w.num_panels());
      if (t.tile_panels < w.num_panels()) {
        EXPECT_EQ(t.tile_panels % kernels.panel_block, 0) << isa.name << " m " << m;
      }
      if (m > 128) EXPECT_EQ(t.tile_rows % kernels.row_block, 0) << isa.name << " m " << m;
    }
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
  QuantizeRows(x.data(), k, m, q);
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

// The AVX2 quantizer gives the scalar one's bits: codes, scales and sums,
// on values that round at .5 (to even), a zero block, huge and tiny blocks.
TEST(QuantizeActTest, Avx2QuantizerGivesTheScalarBits) {
  if (!IsaLevelSupported(IsaLevel::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(11);
  const int64_t k = 32 * 40;
  std::vector<float> x(k);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float spread = std::ldexp(1.0f, static_cast<int>(b % 20) * 6 - 60);
    std::normal_distribution<float> normal(0.0f, spread);
    for (int e = 0; e < 32; ++e) x[b * 32 + e] = normal(rng);
  }
  for (int e = 0; e < 32; ++e) x[64 + e] = 0;                                  // a zero block
  for (int e = 0; e < 32; ++e) x[96 + e] = static_cast<float>(e - 16) + 0.5f;  // ties
  x[96] = 127.0f;  // so that the scale is 1 and the ties stay ties
  std::vector<int8_t> q_scalar(k), q_avx2(k);
  std::vector<float> s_scalar(k / 32), s_avx2(k / 32);
  std::vector<int32_t> sum_scalar(k / 16), sum_avx2(k / 16);
  QuantizeRowScalar(x.data(), k, q_scalar.data(), s_scalar.data(), sum_scalar.data());
  QuantizeRowAvx2(x.data(), k, q_avx2.data(), s_avx2.data(), sum_avx2.data());
  EXPECT_EQ(q_scalar, q_avx2);
  EXPECT_EQ(0, std::memcmp(s_scalar.data(), s_avx2.data(), sizeof(float) * s_scalar.size()));
  EXPECT_EQ(sum_scalar, sum_avx2);
  EXPECT_EQ(q_scalar[96 + 1], -14);  // -14.5 rounds to even
  EXPECT_EQ(q_scalar[96 + 2], -14);  // -13.5 too
}

TEST(QuantizeActTest, GatheredRowsMatchDirectRows) {
  std::mt19937 rng(6);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t m = 9, k = 64;
  std::vector<float> x(m * k);
  for (float& v : x) v = normal(rng);
  auto all_buf = AlignedBytes(QuantizedRowsBytes(m, k));
  auto some_buf = AlignedBytes(QuantizedRowsBytes(3, k));
  const QuantizedRows all = CarveQuantizedRows(all_buf.get(), m, k);
  const QuantizedRows some = CarveQuantizedRows(some_buf.get(), 3, k);
  QuantizeRows(x.data(), k, m, all);
  const int32_t ids[3] = {7, 0, 4};
  QuantizeGatheredRows(x.data(), k, ids, 3, some);
  for (int i = 0; i < 3; ++i) {
    for (int64_t e = 0; e < k; ++e) EXPECT_EQ(some.row_q(i)[e], all.row_q(ids[i])[e]);
    for (int64_t b = 0; b < k / 32; ++b) EXPECT_EQ(some.row_scale(i)[b], all.row_scale(ids[i])[b]);
    for (int64_t b = 0; b < k / 16; ++b) EXPECT_EQ(some.row_sum16(i)[b], all.row_sum16(ids[i])[b]);
  }
}

TEST(QuantizedMatrixTest, ReleasedMappedPagesReadBackFromTheFile) {
  char path[] = "/tmp/dllm_gemm_test_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> bytes(5 * 4096 + 100);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  void* map = mmap(nullptr, bytes.size(), PROT_READ, MAP_PRIVATE, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  const auto* data = static_cast<const uint8_t*>(map);
  // Only whole pages inside the range are released: [4096, 4 * 4096).
  EXPECT_EQ(ReleaseMappedRange(data + 100, 4 * 4096), 3u * 4096);
  EXPECT_EQ(ReleaseMappedRange(data + 100, 200), 0u);
  EXPECT_EQ(std::memcmp(data, bytes.data(), bytes.size()), 0);
  munmap(map, bytes.size());
  close(fd);
  unlink(path);
}

TEST(QuantizedMatrixTest, PackedSizeAndKinds) {
  EXPECT_EQ(PackKindOf(GgmlType::kQ4_K), PackKind::kU4K);
  EXPECT_EQ(PackKindOf(GgmlType::kQ4_0), PackKind::kU4G32);
  EXPECT_EQ(PackKindOf(GgmlType::kQ6_K), PackKind::kU6G16);
  EXPECT_EQ(PackKindOf(GgmlType::kQ8_0), PackKind::kU8G32);
  EXPECT_FALSE(PackSupported(GgmlType::kQ2_K));
  // 4-bit formats stay 4-bit: 16 x 32 codes in 256 bytes plus 128 of scales.
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_0, 16, 32), 384u);
  // Q4_K keeps its 6-bit sub-scales: 4.75 bits a weight.
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_K, 17, 256), 2u * (8 * (256 + 32) + 128));
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_K, 16, 256) * 8, 16u * 256 * 19 / 4);
  // Q6_K: 6-bit codes (192 bytes per 16 x 16) plus d only (64): 8 bits a weight.
  EXPECT_EQ(PackedBytes(GgmlType::kQ6_K, 16, 256), 16u * 256);
}

}  // namespace
}  // namespace dllm
