// ParallelGemm must give bit-identical results to the single-threaded Gemm,
// inside a caller's arena and in the current one, for every ISA level.
#include "engine/parallel/parallel_gemm.h"

#include <oneapi/tbb/task_arena.h>

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/gemm_test_util.h"

namespace dllm {
namespace {

TEST(ParallelGemmTest, MatchesSingleThreadedGemmBitForBit) {
  std::mt19937 rng(3);
  const int64_t m = 70, n = 200, k = 512;
  const std::vector<uint8_t> wb = testing::RandomWeights(GgmlType::kQ4_K, n, k, rng);
  PackedMatrix w(GgmlType::kQ4_K, wb.data(), n, k);
  std::normal_distribution<float> normal;
  std::vector<float> x(m * k);
  for (float& v : x) v = normal(rng);
  auto buf = testing::AlignedBytes(QuantizedRowsBytes(m, k));
  const QuantizedRows xq = CarveQuantizedRows(buf.get(), m, k);
  QuantizeRows(x.data(), k, m, xq);
  // A few rows gathered into their own X, as the last layer and the MoE
  // experts do.
  const std::vector<int32_t> some_rows = {1, 2, 3, 50, 69};
  auto some_buf = testing::AlignedBytes(QuantizedRowsBytes(m, k));
  const QuantizedRows some_q = CarveQuantizedRows(some_buf.get(), m, k);
  QuantizeGatheredRows(x.data(), k, some_rows.data(), static_cast<int64_t>(some_rows.size()),
                       some_q);
  for (IsaLevel isa : SupportedIsaLevels()) {
    const GemmKernels& kernels = SelectGemmKernels(isa);
    for (bool selected : {false, true}) {
      GemmArgs args;
      args.w = &w.view();
      args.x = selected ? &some_q : &xq;
      args.y_stride = n;
      args.num_rows = selected ? static_cast<int64_t>(some_rows.size()) : m;
      std::vector<float> serial(m * n, -1.0f), in_arena(m * n, -1.0f), current(m * n, -1.0f);
      args.y = serial.data();
      Gemm(kernels, args);
      tbb::task_arena arena(2);
      args.y = in_arena.data();
      ParallelGemm(kernels, args, &arena);
      args.y = current.data();
      ParallelGemm(kernels, args);
      EXPECT_EQ(serial, in_arena) << IsaLevelName(isa);
      EXPECT_EQ(serial, current) << IsaLevelName(isa);
    }
  }
}

TEST(ParallelGemmTest, ParallelQuantizeAndGemmMatchTheSerialOnes) {
  std::mt19937 rng(9);
  const int64_t m_all = 50, n = 70, k = 256, ldx = k + 5, ldy = n + 2;
  const std::vector<uint8_t> wb = testing::RandomWeights(GgmlType::kQ6_K, n, k, rng);
  PackedMatrix w(GgmlType::kQ6_K, wb.data(), n, k);
  std::normal_distribution<float> normal;
  std::vector<float> x(m_all * ldx);
  for (float& v : x) v = normal(rng);
  const std::vector<int32_t> rows = {49, 3,  3,  17, 0,  20, 21, 22, 23,
                                     24, 25, 26, 27, 28, 29, 30, 31, 32};
  auto sbuf = testing::AlignedBytes(QuantizedRowsBytes(m_all, k));
  auto pbuf = testing::AlignedBytes(QuantizedRowsBytes(m_all, k));
  const QuantizedRows serial_q = CarveQuantizedRows(sbuf.get(), m_all, k);
  const QuantizedRows par_q = CarveQuantizedRows(pbuf.get(), m_all, k);
  tbb::task_arena arena(2);
  for (IsaLevel isa : SupportedIsaLevels()) {
    const GemmKernels& kernels = SelectGemmKernels(isa);
    for (bool gathered : {false, true}) {
      const int64_t m = gathered ? static_cast<int64_t>(rows.size()) : m_all;
      std::vector<float> want(m * ldy, -1.0f), got(m * ldy, -1.0f);
      if (gathered) {
        QuantizeGatheredRows(x.data(), ldx, rows.data(), m, serial_q);
      } else {
        QuantizeRows(x.data(), ldx, m, serial_q);
      }
      GemmArgs args;
      args.w = &w.view();
      args.x = &serial_q;
      args.y = want.data();
      args.y_stride = ldy;
      args.num_rows = m;
      Gemm(kernels, args);
      ParallelQuantizeRows(x.data(), ldx, gathered ? rows.data() : nullptr, m, par_q, &arena);
      GemmArgs par = args;
      par.x = &par_q;
      par.y = got.data();
      ParallelGemm(kernels, par, &arena);
      EXPECT_EQ(want, got) << IsaLevelName(isa) << (gathered ? " gathered" : "");
    }
  }
}

}  // namespace
}  // namespace dllm
