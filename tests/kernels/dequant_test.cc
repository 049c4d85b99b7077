// DequantizeRow and the half/bfloat16 conversions: bit-exact against ggml's
// own dequantized values (tests/data/dequant, from ../shared/reference), and
// against blocks built by hand for the types no golden file holds.
#include "kernels/dequant.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "gtest/gtest.h"
#include "kernels/block_types.h"
#include "kernels/ggml_types.h"
#include "service/json/json.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FloatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The value of a half, computed from the format definition in double.
double HalfValue(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

TEST(DequantTest, Fp16ToFp32MatchesFormatDefinition) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    const int exp = (h >> 10) & 31;
    if (exp == 31) {
      if ((h & 1023) == 0) {
        EXPECT_TRUE(std::isinf(f)) << h;
        EXPECT_EQ(std::signbit(f), (h >> 15) != 0) << h;
      } else {
        EXPECT_TRUE(std::isnan(f)) << h;
      }
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), HalfValue(static_cast<uint16_t>(h))) << h;
    EXPECT_EQ(std::signbit(f), (h >> 15) != 0) << h;
  }
}

TEST(DequantTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    const uint16_t back = Fp32ToFp16(f);
    if (std::isnan(f)) {
      EXPECT_EQ(back & 0x7C00, 0x7C00) << h;
      EXPECT_NE(back & 0x03FF, 0) << h;
    } else {
      EXPECT_EQ(back, h) << h;
    }
  }
}

TEST(DequantTest, Fp32ToFp16RoundsToNearestEven) {
  // Between consecutive halves a and a+1 (a with an even mantissa, then an
  // odd one): the midpoint goes to the even one, anything off it to nearest.
  for (uint16_t a : {uint16_t{0x3C00}, uint16_t{0x3C01}, uint16_t{0x0001}, uint16_t{0x0002},
                     uint16_t{0x03FF}, uint16_t{0x7BFE}, uint16_t{0xBC00}, uint16_t{0xBC01}}) {
    const uint16_t b = a + 1;
    const double lo = HalfValue(a), hi = HalfValue(b);
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const uint16_t even = (a & 1) == 0 ? a : b;
    EXPECT_EQ(Fp32ToFp16(mid), even) << std::hex << a;
    EXPECT_EQ(Fp32ToFp16(std::nextafter(mid, static_cast<float>(lo))), a) << std::hex << a;
    EXPECT_EQ(Fp32ToFp16(std::nextafter(mid, static_cast<float>(hi))), b) << std::hex << a;
  }
  // Past the largest half's midpoint to 2^16 goes to infinity; below it, 65504.
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7C00);
  EXPECT_EQ(Fp32ToFp16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(-1e10f), 0xFC00);
  EXPECT_EQ(Fp32ToFp16(INFINITY), 0x7C00);
  // Half the smallest subnormal is a tie with zero: goes to zero (even).
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(Fp32ToFp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(Fp32ToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(std::nanf("")), 0x7E00);
  EXPECT_EQ(Fp32ToFp16(-std::nanf("")), 0xFE00);
}

TEST(DequantTest, Bf16Conversions) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Bf16ToFp32(static_cast<uint16_t>(h));
    EXPECT_EQ(BitsOf(f), h << 16);
    const uint16_t back = Fp32ToBf16(f);
    if (std::isnan(f)) {
      EXPECT_EQ(back, h | 64) << h;  // quieted
    } else {
      EXPECT_EQ(back, h) << h;
    }
  }
  // Ties to even: 1 + 2^-8 is halfway between bf16 1.0 (0x3F80) and 0x3F81.
  EXPECT_EQ(Fp32ToBf16(FloatOf(0x3F808000)), 0x3F80);
  EXPECT_EQ(Fp32ToBf16(FloatOf(0x3F818000)), 0x3F82);
  EXPECT_EQ(Fp32ToBf16(FloatOf(0x3F808001)), 0x3F81);
  EXPECT_EQ(Fp32ToBf16(FloatOf(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(Fp32ToBf16(FloatOf(0x7F800001)), 0x7FC0);  // signalling NaN -> quiet
  EXPECT_EQ(Fp32ToBf16(FloatOf(0x7F7FFFFF)), 0x7F80);  // rounds up to inf
}

// --- Hand-made blocks for the types without golden files. Expected values
// are computed here from the format definitions, in double, then rounded once
// to float: ggml's single float product/sum gives exactly that.

uint16_t Half(float f) { return Fp32ToFp16(f); }

TEST(DequantTest, Q4_1HandMadeBlock) {
  BlockQ4_1 b;
  b.d = Half(0.375f);
  b.m = Half(-2.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  DequantizeRow(GgmlType::kQ4_1, &b, y, 32);
  for (int j = 0; j < 32; ++j) {
    const int q = j < 16 ? j : 15 - (j - 16);
    EXPECT_EQ(y[j], static_cast<float>(q * 0.375 - 2.5)) << j;
  }
}

// Q5 5th bits: element j < 16 uses bit j of qh, element j + 16 bit j + 16.
void FillQ5(const int (&q)[32], uint8_t* qh, uint8_t* qs) {
  uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
    h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    h |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(h >> (8 * k));
}

TEST(DequantTest, Q5_0HandMadeBlock) {
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = (j * 7 + 3) % 32;
  BlockQ5_0 b;
  b.d = Half(-0.125f);
  FillQ5(q, b.qh, b.qs);
  float y[32];
  DequantizeRow(GgmlType::kQ5_0, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], static_cast<float>((q[j] - 16) * -0.125)) << j;
}

TEST(DequantTest, Q5_1HandMadeBlock) {
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = (j * 11 + 5) % 32;
  BlockQ5_1 b;
  b.d = Half(0.0999755859375f);  // exactly representable as a half
  b.m = Half(1.5f);
  ASSERT_EQ(Fp16ToFp32(b.d), 0.0999755859375f);
  FillQ5(q, b.qh, b.qs);
  float y[32];
  DequantizeRow(GgmlType::kQ5_1, &b, y, 32);
  for (int j = 0; j < 32; ++j) {
    // ggml rounds the product to float before adding the min.
    const float prod = static_cast<float>(q[j] * 0.0999755859375);
    EXPECT_EQ(y[j], prod + 1.5f) << j;
  }
}

TEST(DequantTest, Bf16AndF32Rows) {
  const std::vector<uint16_t> bf = {0x3F80, 0xC000, 0x0000, 0x8000, 0x7F80, 0x3EAA};
  std::vector<float> y(bf.size());
  DequantizeRow(GgmlType::kBF16, bf.data(), y.data(), static_cast<int64_t>(bf.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(BitsOf(y[2]), 0u);
  EXPECT_EQ(BitsOf(y[3]), 0x80000000u);
  EXPECT_TRUE(std::isinf(y[4]));
  EXPECT_EQ(y[5], std::ldexp(170.0f, -9));  // exp 125, mantissa 0x2A
  const float f[3] = {1.5f, -0.0f, 3e38f};
  float g[3];
  DequantizeRow(GgmlType::kF32, f, g, 3);
  EXPECT_EQ(std::memcmp(f, g, sizeof(f)), 0);
}

// --- Golden values: ggml's dequantization of real tensors.

std::optional<std::string> FindModel(const std::string& file) {
  const std::string local = testing::TestDataDir() + "/models/" + file;
  if (std::filesystem::exists(local)) return local;
  if (auto shared = testing::SharedDir()) {
    const std::string p = *shared + "/models/" + file;
    if (std::filesystem::exists(p)) return p;
  }
  return std::nullopt;
}

TEST(DequantTest, MatchesGgmlGoldens) {
  const std::string dir = testing::TestDataDir() + "/dequant";
  absl::StatusOr<Json> index = ReadJsonFile(dir + "/index.json");
  ASSERT_TRUE(index.ok()) << index.status();
  const std::string values = testing::ReadFileOrDie(dir + "/values.f32");
  const std::string blocks = testing::ReadFileOrDie(dir + "/blocks.bin");

  std::map<std::string, int> checked_per_type;
  std::map<std::string, GgufFile> open;
  int skipped = 0;
  for (const Json& e : *index) {
    const std::string file = e["file"].get<std::string>();
    const std::string tensor_name = e["tensor"].get<std::string>();
    const std::string type_name = e["type"].get<std::string>();
    SCOPED_TRACE(file + ": " + tensor_name + " (" + type_name + ")");
    // Entries of a model not kept whole carry the rows they check
    // (`blocks.bin`: the file's bytes of the tensor's first rows).
    const bool from_blocks = e.contains("blocks_offset");
    std::optional<std::string> path = from_blocks ? std::nullopt : FindModel(file);
    if (!path && !from_blocks) {
      ++skipped;
      std::printf("skipped %s %s: model in neither tests/data nor shared\n", file.c_str(),
                  tensor_name.c_str());
      continue;
    }
    std::vector<float> y;
    if (from_blocks) {
      const std::optional<GgmlType> type = ParseGgmlType(type_name);
      ASSERT_TRUE(type.has_value());
      const int64_t row = e["ne"][0].get<int64_t>();
      const size_t row_bytes = RowBytes(*type, row);
      const size_t at = static_cast<size_t>(e["blocks_offset"].get<int64_t>());
      const size_t bytes = static_cast<size_t>(e["blocks_bytes"].get<int64_t>());
      ASSERT_LE(at + bytes, blocks.size());
      ASSERT_EQ(bytes % row_bytes, 0u);
      y.resize(bytes / row_bytes * static_cast<size_t>(row));
      for (size_t r = 0; r < bytes / row_bytes; ++r) {
        DequantizeRow(*type, reinterpret_cast<const uint8_t*>(blocks.data() + at + r * row_bytes),
                      y.data() + r * row, row);
      }
    } else {
      auto it = open.find(file);
      if (it == open.end()) {
        absl::StatusOr<GgufFile> f = GgufFile::Open(*path);
        ASSERT_TRUE(f.ok()) << f.status();
        it = open.emplace(file, std::move(*f)).first;
      }
      const GgufTensor* t = it->second.FindTensor(tensor_name);
      ASSERT_NE(t, nullptr);
      ASSERT_EQ(std::string(GgmlTypeName(t->type)), type_name);
      ASSERT_EQ(t->ne[0], e["ne"][0].get<int64_t>());
      ASSERT_EQ(t->ne[1], e["ne"][1].get<int64_t>());
      ASSERT_EQ(static_cast<int64_t>(t->n_bytes), e["n_bytes"].get<int64_t>());
      ASSERT_EQ(static_cast<int64_t>(it->second.data_offset() + t->offset),
                e["gguf_data_offset"].get<int64_t>());
      // Dequantize the whole tensor row by row.
      const int64_t row = t->ne[0];
      const size_t row_bytes = RowBytes(t->type, row);
      y.resize(static_cast<size_t>(t->n_elements()));
      for (int64_t r = 0; r < t->n_rows(); ++r) {
        DequantizeRow(t->type, t->data + r * row_bytes, y.data() + r * row, row);
      }
    }

    const int64_t n_values = e["n_values"].get<int64_t>();
    ASSERT_LE(n_values, static_cast<int64_t>(y.size()));
    const size_t off = static_cast<size_t>(e["values_offset"].get<int64_t>());
    ASSERT_LE(off + n_values * sizeof(float), values.size());
    int mismatches = 0;
    for (int64_t k = 0; k < n_values; ++k) {
      uint32_t want;
      std::memcpy(&want, values.data() + off + k * sizeof(float), sizeof(want));
      if (BitsOf(y[k]) != want && ++mismatches <= 5) {
        ADD_FAILURE() << "element " << k << ": got " << y[k] << " (0x" << std::hex << BitsOf(y[k])
                      << "), want " << FloatOf(want) << " (0x" << want << ")";
      }
    }
    EXPECT_EQ(mismatches, 0);

    ++checked_per_type[type_name];
    if (from_blocks) continue;  // the whole-tensor sums need the whole tensor
    double sum = 0, sumsq = 0, abs_sum = 0;
    for (float v : y) {
      sum += v;
      sumsq += static_cast<double>(v) * v;
      abs_sum += std::fabs(v);
    }
    // The goldens were summed in a different order; the bound is float64
    // rounding over the whole tensor, not a quantization tolerance.
    const double eps = 1e-12 * static_cast<double>(y.size());
    EXPECT_NEAR(sum, e["sum_all"].get<double>(), eps * abs_sum + 1e-12);
    EXPECT_NEAR(sumsq, e["sumsq_all"].get<double>(), eps * sumsq + 1e-12);
  }
  std::printf("checked:");
  for (const auto& [type, n] : checked_per_type) std::printf(" %s=%d", type.c_str(), n);
  std::printf("; skipped %d\n", skipped);
  // tests/data alone covers every quantized type in the goldens.
  for (const char* type : {"Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"}) {
    EXPECT_GE(checked_per_type[type], 1) << type;
  }
}

}  // namespace
}  // namespace dllm
