// Hostile and malformed GGUF input: truncation at every header byte, and one
// hand-made file per validation rule. Each must give a precise status, never
// a crash (this suite also runs under ASan/UBSan).
#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::GgufBuilder;
using testing::StatusIs;

absl::Status ParseBytes(const std::string& bytes) {
  // Copy into an exact-size allocation so ASan catches any read past the end.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes.size() + 1]);
  std::memcpy(buf.get(), bytes.data(), bytes.size());
  return GgufFile::Parse(buf.get(), bytes.size(), "test.gguf").status();
}

// Parses every prefix `bytes[0, cut)` for `cut` in `cuts`, each placed flush
// against the end of one allocation so ASan sees any read past the cut, and
// requires a clean INVALID_ARGUMENT naming an offset.
void ExpectEveryCutFails(const std::string& bytes, const std::vector<size_t>& cuts) {
  size_t longest = 1;
  for (size_t cut : cuts) longest = std::max(longest, cut);
  std::unique_ptr<uint8_t[]> buf(new uint8_t[longest]);
  for (size_t cut : cuts) {
    uint8_t* start = buf.get() + (longest - cut);
    std::memcpy(start, bytes.data(), cut);
    const absl::Status s = GgufFile::Parse(start, cut, "cut.gguf").status();
    ASSERT_FALSE(s.ok()) << "cut at " << cut;
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "cut at " << cut << ": " << s;
    ASSERT_NE(s.message().find("offset"), absl::string_view::npos) << s;
  }
}

// Cuts inside the data section: the last tensor no longer fits.
std::vector<size_t> DataCuts(const GgufFile& f) {
  std::vector<size_t> cuts;
  const size_t data_bytes = f.file_size() - f.data_offset();
  for (int k = 0; k < 64; ++k) cuts.push_back(f.data_offset() + data_bytes * k / 64);
  cuts.push_back(f.file_size() - 1);
  return cuts;
}

TEST(GgufHostileTest, TruncatedSmallModelFailsCleanlyAtEveryByte) {
  const std::string bytes = testing::TinyModelBuilder("dream").Build();
  auto full = GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t");
  ASSERT_TRUE(full.ok()) << full.status();
  std::vector<size_t> cuts;
  for (size_t cut = 0; cut < full->data_offset(); ++cut) cuts.push_back(cut);
  for (size_t cut : DataCuts(*full)) cuts.push_back(cut);
  ExpectEveryCutFails(bytes, cuts);
}

TEST(GgufHostileTest, TruncatedReferenceModelFailsCleanly) {
  // A llama.cpp-written file: every byte of the fixed header and of the
  // tensor-info section, every 61st byte of the (large) tokenizer metadata.
  const std::string path = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  const std::string bytes = testing::ReadFileOrDie(path);
  auto full = GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
  ASSERT_TRUE(full.ok()) << full.status();
  size_t info_bytes = 0;
  for (const GgufTensor& t : full->tensors())
    info_bytes += 8 + t.name.size() + 4 + 8 * t.n_dims + 12;
  const size_t info_start = full->data_offset() - info_bytes - full->alignment();
  std::vector<size_t> cuts;
  for (size_t cut = 0; cut < full->data_offset(); ++cut) {
    if (cut < 4096 || cut >= info_start || cut % 61 == 0) cuts.push_back(cut);
  }
  for (size_t cut : DataCuts(*full)) cuts.push_back(cut);
  ExpectEveryCutFails(bytes, cuts);
  EXPECT_TRUE(ParseBytes(bytes).ok());
}

struct Malformed {
  const char* rule;
  std::string bytes;
  absl::StatusCode code;
  const char* message;
};

std::vector<Malformed> MalformedFiles() {
  std::vector<Malformed> cases;
  auto add = [&cases](const char* rule, GgufBuilder b, absl::StatusCode code, const char* msg) {
    cases.push_back({rule, b.Build(), code, msg});
  };
  auto valid = [] {
    GgufBuilder b;
    b.Str("general.architecture", "llada");
    b.AddTensor("w", 0, {4, 2});
    return b;
  };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  {
    GgufBuilder b = valid();
    b.magic = 0x12345678;
    add("bad magic", b, kInvalid, "bad magic");
  }
  {
    GgufBuilder b = valid();
    b.version = 1;
    add("version 1", b, absl::StatusCode::kUnimplemented, "version 1 is obsolete");
  }
  {
    GgufBuilder b = valid();
    b.version = 7;
    add("unknown version", b, kInvalid, "unsupported GGUF version 7");
  }
  {
    GgufBuilder b = valid();
    b.version = 0x03000000;
    add("big endian", b, absl::StatusCode::kUnimplemented, "big-endian");
  }
  {
    GgufBuilder b = valid();
    b.n_tensors_override = uint64_t{1} << 40;
    add("tensor count", b, kInvalid, "tensor count");
  }
  {
    GgufBuilder b = valid();
    b.n_kv_override = ~uint64_t{0};
    add("kv count", b, kInvalid, "metadata count");
  }
  {
    GgufBuilder b;
    b.RawKv("k", 8, GgufBuilder::EncU64(uint64_t{1} << 40) + "abc");
    add("string length over limit", b, kInvalid, "exceeds the limit");
  }
  {
    GgufBuilder b;
    b.RawKv("k", 8, GgufBuilder::EncU64(1000) + "abc");
    add("string past end of file", b, kInvalid, "truncated: string value needs 1000 bytes");
  }
  {
    GgufBuilder b;
    b.RawKv("k", 13, "");
    add("unknown value type", b, kInvalid, "unknown value type of key 'k' 13");
  }
  {
    GgufBuilder b;
    b.RawKv("k", 9, GgufBuilder::EncU32(4) + GgufBuilder::EncU64(uint64_t{1} << 60));
    add("array length", b, kInvalid, "array length 1152921504606846976");
  }
  {
    GgufBuilder b;
    b.RawKv("k", 9, GgufBuilder::EncU32(99) + GgufBuilder::EncU64(1));
    add("unknown array element type", b, kInvalid, "unknown array element type 99");
  }
  {
    std::string nested = GgufBuilder::EncU32(4) + GgufBuilder::EncU64(0);
    for (int d = 0; d < 12; ++d) nested = GgufBuilder::EncU32(9) + GgufBuilder::EncU64(1) + nested;
    GgufBuilder b;
    b.RawKv("k", 9, nested.substr(0));
    add("array nesting", b, kInvalid, "nested deeper than 8");
  }
  {
    GgufBuilder b;
    b.U32("k", 1).U32("k", 2);
    add("duplicate key", b, kInvalid, "duplicate metadata key 'k'");
  }
  {
    GgufBuilder b = valid();
    b.Str("general.alignment", "32");
    add("alignment type", b, kInvalid, "general.alignment has type string");
  }
  {
    GgufBuilder b = valid();
    b.U32("general.alignment", 48);
    add("alignment not power of two", b, kInvalid, "not a power of two");
  }
  {
    GgufBuilder b = valid();
    b.U32("general.alignment", 0);
    add("alignment zero", b, kInvalid, "not a power of two");
  }
  {
    GgufBuilder b;
    b.AddTensor({"w", 0, {}, std::string(4, '\0'), std::nullopt});
    add("n_dims 0", b, kInvalid, "n_dims 0 not in [1, 4]");
  }
  {
    GgufBuilder b;
    b.AddTensor({"w", 0, {1, 1, 1, 1, 1}, std::string(4, '\0'), std::nullopt});
    add("n_dims 5", b, kInvalid, "n_dims 5 not in [1, 4]");
  }
  {
    GgufBuilder b;
    b.AddTensor({"w", 0, {4, 0}, "", std::nullopt});
    add("zero dimension", b, kInvalid, "dimension 1 is 0");
  }
  {
    GgufBuilder b;
    b.AddTensor({"w", 0, {uint64_t{1} << 32, uint64_t{1} << 32}, "", std::nullopt});
    add("element count overflow", b, kInvalid, "element count overflows");
  }
  {
    GgufBuilder b;
    b.AddTensor({"w", 77, {32}, std::string(32, '\0'), std::nullopt});
    add("unknown tensor type", b, kInvalid, "unknown tensor type id 77");
  }
  {
    GgufBuilder b;
    b.AddTensor({"w", 4, {32}, std::string(32, '\0'), std::nullopt});
    add("removed tensor type", b, kInvalid, "unknown tensor type id 4");
  }
  {
    GgufBuilder b;
    b.AddTensor("w", 12, {100, 2});
    add("row not a block multiple", b, kInvalid, "not a multiple of Q4_K's block size 256");
  }
  {
    GgufBuilder b;
    b.AddTensor({"w", 0, {4}, std::string(16, '\0'), 8});
    add("misaligned offset", b, kInvalid, "data offset 8 is not a multiple of the alignment 32");
  }
  {
    GgufBuilder b;
    b.AddTensor({"w", 0, {4}, std::string(16, '\0'), uint64_t{1} << 50});
    b.tensors()[0].data.clear();
    add("offset past end", b, kInvalid, "exceeds the data section");
  }
  {
    GgufBuilder b = valid();
    b.AddTensor({"v", 0, {16}, std::string(64, '\0'), 0});
    add("overlapping tensors", b, kInvalid, "overlaps tensor");
  }
  {
    GgufBuilder b = valid();
    b.AddTensor("w", 0, {4});
    add("duplicate tensor name", b, kInvalid, "duplicate tensor name 'w'");
  }
  {
    GgufBuilder b;
    b.AddTensor({"w", 0, {4}, "", 0});
    b.tensors()[0].data.clear();
    b.AddTensor({"x", 0, {1}, "", 0});
    // data section holds nothing at all: first tensor exceeds it.
    add("data section missing", b, kInvalid, "exceeds the data section");
  }
  return cases;
}

TEST(GgufHostileTest, EachMalformedFileGetsAPreciseError) {
  for (const Malformed& m : MalformedFiles()) {
    SCOPED_TRACE(m.rule);
    const absl::Status s = ParseBytes(m.bytes);
    EXPECT_THAT(s, StatusIs(m.code, m.message));
    if (m.code == absl::StatusCode::kInvalidArgument) {
      EXPECT_NE(s.message().find("test.gguf: offset "), absl::string_view::npos) << s;
    }
  }
}

TEST(GgufHostileTest, UnsupportedTensorTypeIsReportedAtLoad) {
  GgufBuilder b = testing::TinyModelBuilder("llada");
  b.tensors()[3].type = 10;  // Q2_K: a known type the kernels do not run
  b.tensors()[3].ne = {256, 32};
  b.tensors()[3].data.assign(84 * 32, '\0');
  const std::string bytes = b.Build();
  auto f = GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "q2k");
  ASSERT_TRUE(f.ok()) << f.status();
  auto config = ModelConfigFromGguf(*f);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(CheckCompatible(*f, *config),
              StatusIs(absl::StatusCode::kUnimplemented,
                       "unsupported tensor type Q2_K for tensor " + b.tensors()[3].name));
}

TEST(GgufHostileTest, HugeArraysOfEmptyArraysStayBounded) {
  // 2^20 nested empty arrays: 12 bytes each in the file. The reader must
  // accept it without blowing up memory (a small multiple of the file).
  const uint64_t n = 1 << 20;
  std::string payload = GgufBuilder::EncU32(9) + GgufBuilder::EncU64(n);
  for (uint64_t k = 0; k < n; ++k) payload += GgufBuilder::EncU32(4) + GgufBuilder::EncU64(0);
  GgufBuilder b;
  b.RawKv("k", 9, payload);
  EXPECT_TRUE(ParseBytes(b.Build()).ok());
  // Claiming one more element than the file holds is caught up front.
  GgufBuilder c;
  c.RawKv("k", 9, GgufBuilder::EncU32(9) + GgufBuilder::EncU64(n + 1) + payload.substr(12));
  EXPECT_THAT(ParseBytes(c.Build()), StatusIs(absl::StatusCode::kInvalidArgument, "array"));
}

}  // namespace
}  // namespace dllm
