// GgufWriter: files it writes read back identically through GgufFile and
// through an independent parser (@huggingface/gguf, run with node from
// tests/tools), and every misuse or I/O failure is a precise Status.
#include "engine/synth/gguf_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "engine/synth/quantize.h"
#include "gtest/gtest.h"
#include "kernels/dequant.h"
#include "service/json/json.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::IsOk;
using testing::StatusIs;

struct TestTensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};

std::vector<TestTensor> MakeTensors() {
  const std::vector<std::pair<GgmlType, std::vector<int64_t>>> specs = {
      {GgmlType::kQ8_0, {256, 4}}, {GgmlType::kQ4_0, {64, 3}},     {GgmlType::kQ4_K, {256, 2}},
      {GgmlType::kQ6_K, {512, 1}}, {GgmlType::kQ5_K, {256, 1, 2}}, {GgmlType::kF16, {32, 5}},
      {GgmlType::kF32, {7}},       {GgmlType::kBF16, {16, 2, 3}},  {GgmlType::kQ5_1, {32, 1, 1, 2}},
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  std::vector<TestTensor> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    TestTensor t;
    t.name = "blk." + std::to_string(i) + "." + GgmlTypeName(specs[i].first) + ".weight";
    t.type = specs[i].first;
    t.ne = specs[i].second;
    int64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    const size_t row_bytes = RowBytes(t.type, t.ne[0]);
    t.bytes.resize(row_bytes * rows);
    std::vector<float> x(t.ne[0]);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : x) v = dist(rng);
      QuantizeRow(t.type, x.data(), t.bytes.data() + r * row_bytes, t.ne[0]);
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Adds one key of every value type, and arrays of several element types.
void AddAllMetadata(GgufWriter* w) {
  w->AddString("general.architecture", "llada");
  w->AddString("general.name", "writer test \xE2\x9C\x93");
  w->AddUint8("test.u8", 200);
  w->AddInt8("test.i8", -100);
  w->AddUint16("test.u16", 60000);
  w->AddInt16("test.i16", -30000);
  w->AddUint32("test.u32", 4000000000u);
  w->AddInt32("test.i32", -2000000000);
  w->AddFloat32("test.f32", 0.1f);
  w->AddBool("test.bool_true", true);
  w->AddBool("test.bool_false", false);
  w->AddUint64("test.u64", 0xFFFFFFFFFFFFFFF0ull);
  w->AddInt64("test.i64", -0x7000000000000000ll);
  w->AddFloat64("test.f64", 1.0 / 3.0);
  w->AddString("test.empty_string", "");
  w->AddStringArray("tokenizer.ggml.tokens", {"<s>", "", "hello", "w\xC3\xB6rld"});
  w->AddStringArray("test.empty_string_array", {});
  w->AddInt32Array("tokenizer.ggml.token_type", {1, 3, 1, -6});
  w->AddUint32Array("test.u32_array", {0, 1, 4294967295u});
  w->AddFloat32Array("tokenizer.ggml.scores", {0.0f, -1.5f, 3.25e-8f});
  const uint8_t bools[3] = {1, 0, 1};
  w->AddScalarArray("test.bool_array", GgufValueType::kBool, bools, 3);
  const double f64s[2] = {-2.5, 1e300};
  w->AddScalarArray("test.f64_array", GgufValueType::kFloat64, f64s, 2);
  const int64_t i64s[2] = {-1, 0x7FFFFFFFFFFFFFFFll};
  w->AddScalarArray("test.i64_array", GgufValueType::kInt64, i64s, 2);
  const uint16_t u16s[2] = {7, 65535};
  w->AddScalarArray("test.u16_array", GgufValueType::kUint16, u16s, 2);
}

std::string WriteTestFile(const std::vector<TestTensor>& tensors, uint32_t alignment = 32) {
  const std::string path = testing::TempDir() + "/written.gguf";
  absl::StatusOr<GgufWriter> w = GgufWriter::Create(path);
  EXPECT_THAT(w.status(), IsOk());
  if (alignment != 32) w->AddUint32("general.alignment", alignment);
  AddAllMetadata(&*w);
  for (const TestTensor& t : tensors) EXPECT_THAT(w->AddTensor(t.name, t.type, t.ne), IsOk());
  EXPECT_THAT(w->WriteHeader(), IsOk());
  EXPECT_EQ(w->data_offset() % alignment, 0u);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::vector<uint8_t>& b = tensors[i].bytes;
    if (i == 2) {
      // Streamed in uneven chunks.
      size_t done = 0;
      for (size_t chunk : {size_t{1}, size_t{100}, size_t{7}}) {
        EXPECT_THAT(w->WriteTensorData(b.data() + done, chunk), IsOk());
        done += chunk;
      }
      EXPECT_THAT(w->WriteTensorData(b.data() + done, b.size() - done), IsOk());
    } else {
      EXPECT_THAT(w->WriteTensorData(b.data(), b.size()), IsOk());
    }
  }
  EXPECT_THAT(w->Finish(), IsOk());
  return path;
}

void ExpectReadsBack(const std::string& path, const std::vector<TestTensor>& tensors,
                     uint32_t alignment) {
  absl::StatusOr<GgufFile> f = GgufFile::Open(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), alignment);
  EXPECT_EQ(*f->GetString("general.architecture"), "llada");
  EXPECT_EQ(*f->GetString("general.name"), "writer test \xE2\x9C\x93");
  const GgufValue* v = f->FindValue("test.u8");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->type, GgufValueType::kUint8);
  EXPECT_EQ(v->u, 200u);
  EXPECT_EQ(f->FindValue("test.i8")->i, -100);
  EXPECT_EQ(f->FindValue("test.i8")->type, GgufValueType::kInt8);
  EXPECT_EQ(f->FindValue("test.u16")->u, 60000u);
  EXPECT_EQ(f->FindValue("test.i16")->i, -30000);
  EXPECT_EQ(f->FindValue("test.u32")->u, 4000000000u);
  EXPECT_EQ(f->FindValue("test.i32")->i, -2000000000);
  EXPECT_EQ(f->FindValue("test.f32")->type, GgufValueType::kFloat32);
  EXPECT_EQ(static_cast<float>(f->FindValue("test.f32")->f), 0.1f);
  EXPECT_EQ(*f->GetBool("test.bool_true"), true);
  EXPECT_EQ(*f->GetBool("test.bool_false"), false);
  EXPECT_EQ(f->FindValue("test.u64")->u, 0xFFFFFFFFFFFFFFF0ull);
  EXPECT_EQ(f->FindValue("test.i64")->i, -0x7000000000000000ll);
  EXPECT_EQ(f->FindValue("test.f64")->f, 1.0 / 3.0);
  EXPECT_EQ(*f->GetString("test.empty_string"), "");
  std::vector<absl::string_view> tokens = *f->GetStringArray("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens, (std::vector<absl::string_view>{"<s>", "", "hello", "w\xC3\xB6rld"}));
  EXPECT_TRUE(f->GetStringArray("test.empty_string_array")->empty());
  EXPECT_EQ(*f->GetIntArray("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 3, 1, -6}));
  EXPECT_EQ(*f->GetIntArray("test.u32_array"), (std::vector<int64_t>{0, 1, 4294967295ll}));
  EXPECT_EQ(*f->GetFloatArray("tokenizer.ggml.scores"),
            (std::vector<double>{0.0f, -1.5f, 3.25e-8f}));
  const GgufValue* bools = f->FindValue("test.bool_array");
  ASSERT_NE(bools, nullptr);
  EXPECT_EQ(bools->elem_type, GgufValueType::kBool);
  ASSERT_EQ(bools->count, 3u);
  EXPECT_EQ(GgufArrayInt(*bools, 0), 1);
  EXPECT_EQ(GgufArrayInt(*bools, 1), 0);
  EXPECT_EQ(GgufArrayInt(*bools, 2), 1);
  EXPECT_EQ(*f->GetFloatArray("test.f64_array"), (std::vector<double>{-2.5, 1e300}));
  EXPECT_EQ(*f->GetIntArray("test.i64_array"), (std::vector<int64_t>{-1, 0x7FFFFFFFFFFFFFFFll}));
  EXPECT_EQ(*f->GetIntArray("test.u16_array"), (std::vector<int64_t>{7, 65535}));
  EXPECT_EQ(f->metadata().size(), 24u + (alignment != 32 ? 1 : 0));

  ASSERT_EQ(f->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TestTensor& want = tensors[i];
    const GgufTensor& got = f->tensors()[i];
    SCOPED_TRACE(want.name);
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.type, want.type);
    ASSERT_EQ(got.n_dims, static_cast<int>(want.ne.size()));
    for (size_t d = 0; d < want.ne.size(); ++d) EXPECT_EQ(got.ne[d], want.ne[d]);
    EXPECT_EQ(got.offset % alignment, 0u);
    ASSERT_EQ(got.n_bytes, want.bytes.size());
    EXPECT_EQ(std::memcmp(got.data, want.bytes.data(), want.bytes.size()), 0);
  }
}

TEST(GgufWriterTest, WritesEveryValueTypeAndTensorsThatReadBack) {
  const std::vector<TestTensor> tensors = MakeTensors();
  const std::string path = WriteTestFile(tensors);
  ExpectReadsBack(path, tensors, 32);
}

TEST(GgufWriterTest, HonoursGeneralAlignment) {
  const std::vector<TestTensor> tensors = MakeTensors();
  const std::string path = WriteTestFile(tensors, 256);
  ExpectReadsBack(path, tensors, 256);
}

TEST(GgufWriterTest, EmptyFileIsValid) {
  const std::string path = testing::TempDir() + "/empty.gguf";
  absl::StatusOr<GgufWriter> w = GgufWriter::Create(path);
  ASSERT_THAT(w.status(), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  absl::StatusOr<GgufFile> f = GgufFile::Open(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufWriterTest, ReportsMisuse) {
  const std::string path = testing::TempDir() + "/misuse.gguf";
  absl::StatusOr<GgufWriter> w = GgufWriter::Create(path);
  ASSERT_THAT(w.status(), IsOk());
  EXPECT_THAT(w->AddTensor("bad_row", GgmlType::kQ4_K, {128, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, "not a multiple of the Q4_K block"));
  EXPECT_THAT(w->AddTensor("no_dims", GgmlType::kF32, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "0 dimensions"));
  EXPECT_THAT(w->AddTensor("zero", GgmlType::kF32, {4, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, "dimension 0"));
  EXPECT_THAT(w->WriteTensorData("x", 1),
              StatusIs(absl::StatusCode::kFailedPrecondition, "before WriteHeader"));
  ASSERT_THAT(w->AddTensor("a", GgmlType::kF32, {4}), IsOk());
  EXPECT_THAT(w->AddTensor("a", GgmlType::kF32, {4}),
              StatusIs(absl::StatusCode::kInvalidArgument, "declared twice"));
  ASSERT_THAT(w->WriteHeader(), IsOk());
  EXPECT_THAT(w->AddTensor("late", GgmlType::kF32, {4}),
              StatusIs(absl::StatusCode::kFailedPrecondition, "after the header"));
  const float x[5] = {};
  EXPECT_THAT(w->WriteTensorData(x, 8), IsOk());
  EXPECT_THAT(w->Finish(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                    "tensor 'a' has 8 of 16 bytes written"));
  EXPECT_THAT(w->WriteTensorData(x, 12),
              StatusIs(absl::StatusCode::kInvalidArgument, "beyond the 1 declared tensors"));
}

TEST(GgufWriterTest, RejectsDuplicateKeysAndBadAlignment) {
  {
    absl::StatusOr<GgufWriter> w = GgufWriter::Create(testing::TempDir() + "/dup.gguf");
    ASSERT_THAT(w.status(), IsOk());
    w->AddUint32("k", 1);
    w->AddString("k", "again");
    EXPECT_THAT(w->WriteHeader(), StatusIs(absl::StatusCode::kInvalidArgument, "key 'k'"));
  }
  absl::StatusOr<GgufWriter> w = GgufWriter::Create(testing::TempDir() + "/align.gguf");
  ASSERT_THAT(w.status(), IsOk());
  w->AddUint32("general.alignment", 48);
  EXPECT_THAT(w->WriteHeader(), StatusIs(absl::StatusCode::kInvalidArgument, "power of two"));
}

TEST(GgufWriterTest, IoErrorsNameThePathAndReason) {
  const std::string missing = testing::TempDir() + "/no/such/dir/x.gguf";
  EXPECT_THAT(GgufWriter::Create(missing).status(),
              StatusIs(absl::StatusCode::kNotFound, missing + ": cannot create: No such file"));
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full to fill";
  absl::StatusOr<GgufWriter> w = GgufWriter::Create("/dev/full");
  ASSERT_THAT(w.status(), IsOk());
  ASSERT_THAT(w->AddTensor("big", GgmlType::kF32, {1 << 20}), IsOk());
  std::vector<float> x(1 << 20);
  absl::Status s = w->WriteHeader();
  if (s.ok()) s = w->WriteTensorData(x.data(), x.size() * sizeof(float));
  if (s.ok()) s = w->Finish();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted, "/dev/full"));
  EXPECT_NE(s.message().find("No space left on device"), absl::string_view::npos) << s;
}

// --- The independent reader.

using testing::RunCommand;

TEST(GgufWriterTest, IndependentParserReadsIt) {
  std::string out;
  if (RunCommand("command -v node && command -v npm", &out) != 0) {
    GTEST_SKIP() << "node/npm not installed: cannot run @huggingface/gguf";
  }
  const std::string tools = testing::TestDataDir() + "/../tools";
  ASSERT_EQ(RunCommand("'" + tools + "/install-node-deps' 2>&1", &out), 0)
      << "tests/tools/install-node-deps failed:\n"
      << out;

  const std::vector<TestTensor> tensors = MakeTensors();
  const std::string path = WriteTestFile(tensors, 64);
  ASSERT_EQ(RunCommand("node '" + tools + "/gguf_dump.mjs' '" + path + "' 2>&1", &out), 0) << out;
  absl::StatusOr<Json> j = ParseJson(out);
  ASSERT_THAT(j.status(), IsOk()) << out;

  absl::StatusOr<GgufFile> f = GgufFile::Open(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ((*j)["tensor_data_offset"].get<std::string>(), std::to_string(f->data_offset()));
  const Json& infos = (*j)["tensors"];
  ASSERT_EQ(infos.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(infos[i]["name"].get<std::string>(), tensors[i].name);
    EXPECT_EQ(infos[i]["dtype"].get<int64_t>(), static_cast<int64_t>(tensors[i].type));
    ASSERT_EQ(infos[i]["n_dims"].get<int64_t>(), static_cast<int64_t>(tensors[i].ne.size()));
    for (size_t d = 0; d < tensors[i].ne.size(); ++d) {
      EXPECT_EQ(infos[i]["shape"][d].get<std::string>(), std::to_string(tensors[i].ne[d]));
    }
    EXPECT_EQ(infos[i]["offset"].get<std::string>(), std::to_string(f->tensors()[i].offset));
  }

  // Every key, with the same type and value as our reader sees. The parser
  // also reports the header fields (version, tensor_count, kv_count).
  const Json& md = (*j)["metadata"];
  EXPECT_EQ(md["version"]["value"].get<int64_t>(), 3);
  EXPECT_EQ(md["tensor_count"]["value"].get<std::string>(), std::to_string(tensors.size()));
  EXPECT_EQ(md["kv_count"]["value"].get<std::string>(), std::to_string(f->metadata().size()));
  for (const auto& [key, v] : f->metadata()) {
    SCOPED_TRACE(std::string(key));
    const Json& e = md[key];
    ASSERT_TRUE(e.is_object());
    EXPECT_EQ(e["type"].get<int64_t>(), static_cast<int64_t>(v.type));
    const Json& val = e["value"];
    switch (v.type) {
      case GgufValueType::kString:
        EXPECT_EQ(val.get<std::string>(), std::string(v.str));
        break;
      case GgufValueType::kBool:
        EXPECT_EQ(val.get<bool>(), v.b);
        break;
      case GgufValueType::kFloat32:
      case GgufValueType::kFloat64:
        EXPECT_EQ(val.get<double>(), v.f);
        break;
      case GgufValueType::kUint64:
        EXPECT_EQ(val.get<std::string>(), std::to_string(v.u));
        break;
      case GgufValueType::kInt64:
        EXPECT_EQ(val.get<std::string>(), std::to_string(v.i));
        break;
      case GgufValueType::kArray: {
        EXPECT_EQ(e["subType"].get<int64_t>(), static_cast<int64_t>(v.elem_type));
        ASSERT_EQ(val.size(), v.count);
        for (uint64_t k = 0; k < v.count; ++k) {
          const Json& item = val[k];
          switch (v.elem_type) {
            case GgufValueType::kString:
              EXPECT_EQ(item.get<std::string>(), std::string(v.strings[k]));
              break;
            case GgufValueType::kBool:
              EXPECT_EQ(item.get<bool>(), GgufArrayInt(v, k) != 0);
              break;
            case GgufValueType::kFloat32:
            case GgufValueType::kFloat64:
              EXPECT_EQ(item.get<double>(), GgufArrayFloat(v, k));
              break;
            case GgufValueType::kInt64:
            case GgufValueType::kUint64:
              EXPECT_EQ(item.get<std::string>(), std::to_string(GgufArrayInt(v, k)));
              break;
            default:
              EXPECT_EQ(item.get<int64_t>(), GgufArrayInt(v, k));
          }
        }
        break;
      }
      default:
        if (v.is_integer()) {
          EXPECT_EQ(val.get<int64_t>(), v.type == GgufValueType::kUint8 ||
                                                v.type == GgufValueType::kUint16 ||
                                                v.type == GgufValueType::kUint32
                                            ? static_cast<int64_t>(v.u)
                                            : v.i);
        }
    }
  }
}

}  // namespace
}  // namespace dllm
