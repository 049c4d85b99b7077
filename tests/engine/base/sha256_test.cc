#include "engine/base/sha256.h"

#include <filesystem>

#include "engine/base/json.h"
#include "engine/gguf/mapped_file.h"
#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

std::string Hash(const std::string& s) {
  return Sha256Hex(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Hash(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalUpdatesMatchOneShot) {
  std::string data(1000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  for (size_t split : {0, 1, 63, 64, 65, 500, 999}) {
    Sha256 sha;
    sha.Update(reinterpret_cast<const uint8_t*>(data.data()), split);
    sha.Update(reinterpret_cast<const uint8_t*>(data.data()) + split, data.size() - split);
    EXPECT_EQ(sha.HexDigest(), Hash(data)) << split;
  }
}

TEST(Sha256Test, MatchesTheManifestOfEveryTestModel) {
  auto manifest = ReadJsonFile(testing::TestDataDir() + "/models/MANIFEST.json");
  ASSERT_TRUE(manifest.ok());
  for (const Json& e : manifest->as_array()) {
    const std::string path = testing::TestDataDir() + "/models/" + e["file"].as_string();
    if (!std::filesystem::exists(path)) continue;
    auto file = MappedFile::Open(path);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(Sha256Hex(file->data(), file->size()), e["sha256"].as_string()) << path;
    EXPECT_EQ(*Sha256File(path), e["sha256"].as_string()) << path;
  }
}

}  // namespace
}  // namespace dllm
