// ParallelGemm must give bit-identical results to the single-threaded Gemm,
// inside a caller's arena and in the current one, for every ISA level.
#include "engine/scheduler/parallel_gemm.h"

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
  QuantizeRows(x.data(), k, nullptr, m, xq);
  const std::vector<int32_t> some_rows = {1, 2, 3, 50, 69};
  for (IsaLevel isa : SupportedIsaLevels()) {
    const GemmKernels& kernels = SelectGemmKernels(isa);
    for (bool selected : {false, true}) {
      GemmArgs args;
      args.w = &w.view();
      args.x = &xq;
      args.y_stride = n;
      args.row_ids = selected ? some_rows.data() : nullptr;
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

TEST(ParallelGemmTest, ParallelPackMatrixMatchesPackMatrix) {
  std::mt19937 rng(8);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
    const int64_t n = 333, k = 512;  // 21 panels, the last one ragged
    const std::vector<uint8_t> wb = testing::RandomWeights(type, n, k, rng);
    const size_t bytes = PackedBytes(type, n, k);
    auto a = testing::AlignedBytes(bytes), b = testing::AlignedBytes(bytes);
    PackMatrix(type, wb.data(), n, k, a.get());
    tbb::task_arena arena(2);
    const QuantizedMatrix v = ParallelPackMatrix(type, wb.data(), n, k, b.get(), &arena);
    EXPECT_EQ(v.panel_bytes * v.num_panels(), bytes);
    EXPECT_EQ(std::memcmp(a.get(), b.get(), bytes), 0) << GgmlTypeName(type);
  }
}

}  // namespace
}  // namespace dllm
