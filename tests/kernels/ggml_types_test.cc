#include "kernels/ggml_types.h"

#include "gtest/gtest.h"

namespace dllm {
namespace {

TEST(GgmlTypesTest, BlockSizesMatchGgml) {
  struct Case {
    GgmlType type;
    int64_t block;
    size_t bytes;
  };
  // Sizes from ggml-common.h's block structs.
  const Case cases[] = {
      {GgmlType::kF32, 1, 4},      {GgmlType::kF16, 1, 2},        {GgmlType::kBF16, 1, 2},
      {GgmlType::kQ4_0, 32, 18},   {GgmlType::kQ4_1, 32, 20},     {GgmlType::kQ5_0, 32, 22},
      {GgmlType::kQ5_1, 32, 24},   {GgmlType::kQ8_0, 32, 34},     {GgmlType::kQ8_1, 32, 36},
      {GgmlType::kQ2_K, 256, 84},  {GgmlType::kQ3_K, 256, 110},   {GgmlType::kQ4_K, 256, 144},
      {GgmlType::kQ5_K, 256, 176}, {GgmlType::kQ6_K, 256, 210},   {GgmlType::kQ8_K, 256, 292},
      {GgmlType::kIQ4_NL, 32, 18}, {GgmlType::kIQ4_XS, 256, 136}, {GgmlType::kTQ2_0, 256, 66},
      {GgmlType::kMXFP4, 32, 17},
  };
  for (const Case& c : cases) {
    const GgmlTypeTraits& t = TraitsOf(c.type);
    EXPECT_EQ(t.block_size, c.block) << t.name;
    EXPECT_EQ(t.type_size, c.bytes) << t.name;
  }
}

TEST(GgmlTypesTest, RemovedAndUnknownIdsAreInvalid) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u}) {
    EXPECT_FALSE(GgmlTypeTraitsOf(id).has_value()) << id;
  }
}

TEST(GgmlTypesTest, SupportedSetIsWhatTheKernelsRun) {
  for (uint32_t id = 0; id < 40; ++id) {
    const auto t = GgmlTypeTraitsOf(id);
    if (!t) continue;
    const bool expected = id == 0 || id == 1 || id == 2 || id == 3 || id == 6 || id == 7 ||
                          id == 8 || id == 12 || id == 13 || id == 14 || id == 30;
    EXPECT_EQ(t->supported, expected) << t->name;
  }
}

TEST(GgmlTypesTest, ParsesNamesCaseInsensitively) {
  EXPECT_EQ(ParseGgmlType("q4_k"), GgmlType::kQ4_K);
  EXPECT_EQ(ParseGgmlType("BF16"), GgmlType::kBF16);
  EXPECT_FALSE(ParseGgmlType("Q4_K_M").has_value());
  EXPECT_EQ(RowBytes(GgmlType::kQ6_K, 512), 420u);
}

}  // namespace
}  // namespace dllm
