// Every model available to tests parses, and what the reader sees matches
// MANIFEST.json (written by the harness that made the files with llama.cpp).
#include "engine/gguf/gguf_reader.h"

#include <filesystem>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::GgufBuilder;

const Json& Manifest() {
  static const Json manifest = [] {
    auto j = ReadJsonFile(testing::TestDataDir() + "/models/MANIFEST.json");
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *j : Json();
  }();
  return manifest;
}

const Json* ManifestEntry(const std::string& file) {
  for (const Json& e : Manifest()) {
    if (e["file"].get<std::string>() == file) return &e;
  }
  return nullptr;
}

TEST(GgufReaderTest, EveryModelMatchesItsManifest) {
  const std::vector<std::string> models = testing::AllTestModels();
  ASSERT_GE(models.size(), 2u);
  for (const std::string& path : models) {
    SCOPED_TRACE(path);
    absl::StatusOr<GgufFile> f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    const Json* m = ManifestEntry(std::filesystem::path(path).filename().string());
    ASSERT_NE(m, nullptr) << "not in MANIFEST.json";
    EXPECT_EQ(f->file_size(), static_cast<size_t>((*m)["bytes"].get<int64_t>()));
    for (const auto& [key, expected] : (*m)["kv"].items()) {
      if (key == "n_vocab") continue;  // derived, not a key
      const GgufValue* v = f->FindValue(key);
      ASSERT_NE(v, nullptr) << key;
      if (expected.is_string()) {
        EXPECT_EQ(*f->GetString(key), expected.get<std::string>()) << key;
      } else if (expected.is_boolean()) {
        EXPECT_EQ(*f->GetBool(key), expected.get<bool>()) << key;
      } else if (v->is_float()) {
        EXPECT_EQ(static_cast<float>(*f->GetFloat(key)), static_cast<float>(expected.get<double>()))
            << key;
      } else {
        EXPECT_EQ(*f->GetInt(key), expected.get<int64_t>()) << key;
      }
    }
    const Json& tensors = (*m)["tensors"];
    EXPECT_EQ(f->tensors().size(), tensors.size());
    for (const auto& [name, info] : tensors.items()) {
      const GgufTensor* t = f->FindTensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(GgmlTypeName(t->type), info[0].get<std::string>()) << name;
      ASSERT_EQ(static_cast<size_t>(t->n_dims), info[1].size()) << name;
      for (int d = 0; d < t->n_dims; ++d) EXPECT_EQ(t->ne[d], info[1][d].get<int64_t>()) << name;
      EXPECT_GE(t->data, f->file_data() + f->data_offset());
      EXPECT_LE(t->data + t->n_bytes, f->file_data() + f->file_size());
    }
    EXPECT_EQ(f->tensors().front().data, f->file_data() + f->data_offset());
  }
}

TEST(GgufReaderTest, TypedAccessorsNameTheKeyAndTypeFound) {
  GgufBuilder b;
  b.U32("a.u32", 7).I32("a.neg", -3).F32("a.f32", 0.5f).Str("a.str", "hi").Bool("a.flag", true);
  b.StrArray("a.strs", {"x", "yz"}).I32Array("a.ints", {1, -2, 3});
  const std::string bytes = b.Build();
  auto f = GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f->GetUint("a.u32"), 7u);
  EXPECT_EQ(*f->GetInt("a.neg"), -3);
  EXPECT_EQ(*f->GetFloat("a.f32"), 0.5);
  EXPECT_EQ(*f->GetString("a.str"), "hi");
  EXPECT_TRUE(*f->GetBool("a.flag"));
  EXPECT_EQ(*f->GetStringArray("a.strs"), (std::vector<absl::string_view>{"x", "yz"}));
  EXPECT_EQ(*f->GetIntArray("a.ints"), (std::vector<int64_t>{1, -2, 3}));

  EXPECT_THAT(f->GetUint("a.neg").status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "'a.neg' value -3"));
  EXPECT_THAT(f->GetString("a.u32").status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                "key 'a.u32' has type uint32, expected string"));
  EXPECT_THAT(f->GetUint("a.strs").status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "has type array[string]"));
  EXPECT_THAT(f->GetBool("missing").status(),
              testing::StatusIs(absl::StatusCode::kNotFound, "missing key 'missing'"));
  EXPECT_EQ(*f->GetUintOr("missing", 9), 9u);
  EXPECT_FALSE(f->GetUintOr("a.str", 9).ok());
}

TEST(GgufReaderTest, ParsesNestedArraysAndEveryScalarType) {
  GgufBuilder b;
  b.version = 2;
  // array[array[int32]] = [[1, 2], []]
  std::string inner1 = GgufBuilder::EncU32(5) + GgufBuilder::EncU64(2) + GgufBuilder::EncU32(1) +
                       GgufBuilder::EncU32(2);
  std::string inner2 = GgufBuilder::EncU32(5) + GgufBuilder::EncU64(0);
  b.RawKv("nested", 9, GgufBuilder::EncU32(9) + GgufBuilder::EncU64(2) + inner1 + inner2);
  for (uint32_t type : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 10u, 11u, 12u}) {
    const size_t n = type <= 1 || type == 7 ? 1 : type <= 3 ? 2 : type <= 6 ? 4 : 8;
    b.RawKv("scalar." + std::to_string(type), type, std::string(n, '\x01'));
  }
  const std::string bytes = b.Build();
  auto f = GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version(), 2u);
  const GgufValue* nested = f->FindValue("nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->TypeString(), "array[array]");
  ASSERT_EQ(nested->arrays.size(), 2u);
  EXPECT_EQ(GgufArrayInt(nested->arrays[0], 1), 2);
  EXPECT_EQ(nested->arrays[1].count, 0u);
  EXPECT_EQ(*f->GetUint("scalar.2"), 0x0101u);
  EXPECT_EQ(*f->GetInt("scalar.11"), 0x0101010101010101);
  EXPECT_TRUE(*f->GetBool("scalar.7"));
}

TEST(GgufReaderTest, HonoursGeneralAlignment) {
  GgufBuilder b;
  b.alignment = 64;
  b.U32("general.alignment", 64);
  b.AddTensor("a", 0, {3}).AddTensor("b", 0, {5});
  const std::string bytes = b.Build();
  auto f = GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->FindTensor("b")->offset, 64u);
}

TEST(GgufReaderTest, MissingFileIsNotFound) {
  EXPECT_THAT(GgufFile::Open("/nonexistent/model.gguf").status(),
              testing::StatusIs(absl::StatusCode::kNotFound, "/nonexistent/model.gguf"));
}

}  // namespace
}  // namespace dllm
