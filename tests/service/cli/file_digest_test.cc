#include "service/cli/file_digest.h"

#include <filesystem>

#include "engine/gguf/mapped_file.h"
#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

std::string Hash(const std::string& s) { return Sha256Hex(s); }

TEST(FileDigestTest, KnownVectors) {
  EXPECT_EQ(Hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Hash(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(FileDigestTest, MatchesTheManifestOfEveryTestModel) {
  auto manifest = ReadJsonFile(testing::TestDataDir() + "/models/MANIFEST.json");
  ASSERT_TRUE(manifest.ok());
  for (const Json& e : *manifest) {
    const std::string path = testing::TestDataDir() + "/models/" + e["file"].get<std::string>();
    if (!std::filesystem::exists(path)) continue;
    auto file = MappedFile::Open(path);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(
        Sha256Hex(absl::string_view(reinterpret_cast<const char*>(file->data()), file->size())),
        e["sha256"].get<std::string>())
        << path;
    EXPECT_EQ(*Sha256File(path), e["sha256"].get<std::string>()) << path;
  }
}

}  // namespace
}  // namespace dllm
