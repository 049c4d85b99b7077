#include "tests/testing/test_paths.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "gtest/gtest.h"
#include "service/cli/file_digest.h"

namespace dllm::testing {

std::string TestDataDir() { return DLLM_TEST_DATA_DIR; }
std::string BinaryDir() { return DLLM_BINARY_DIR; }

std::optional<std::string> SharedDir() {
  if (const char* env = std::getenv("DLLM_SHARED_DIR")) return std::string(env);
  if (std::filesystem::is_directory(DLLM_SHARED_DIR "/models")) return std::string(DLLM_SHARED_DIR);
  return std::nullopt;
}

std::vector<std::string> AllTestModels() {
  std::vector<std::string> dirs = {TestDataDir() + "/models"};
  if (auto shared = SharedDir()) dirs.push_back(*shared + "/models");
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (const std::string& dir : dirs) {
    if (!std::filesystem::is_directory(dir)) continue;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".gguf") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& p : files) {
      if (seen.insert(p.filename().string()).second) out.push_back(p.string());
    }
  }
  return out;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFileOrDie(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(out.good()) << "cannot write " << path;
}

std::string TestNameFromPath(const std::string& path) {
  std::string name = std::filesystem::path(path).stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

std::string TempDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  std::replace(name.begin(), name.end(), '/', '_');
  const std::string base = ::testing::TempDir() + "dllm-" + std::to_string(getpid()) + "-" + name;
  // PIDs are reused (pid_max is often 32768), so a directory left by an
  // earlier process may exist: empty it the first time this process asks.
  static std::mutex mu;
  static std::set<std::string>* fresh = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  if (fresh->insert(base).second) std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  return base;
}

std::string BailingmoeVocabPath() {
  static const std::string path = [] {
    // GGUF strings are a u64 length and the bytes; a metadata value is a
    // u32 type (8: string) and the value. The file has no tensors, so
    // nothing after the metadata moves with it.
    const auto str = [](absl::string_view s) {
      const uint64_t n = s.size();
      return std::string(reinterpret_cast<const char*>(&n), sizeof n) + std::string(s);
    };
    const uint32_t kString = 8;
    const std::string type(reinterpret_cast<const char*>(&kString), sizeof kString);
    std::string bytes = ReadFileOrDie(TestDataDir() + "/tokenizer/vocab-gpt2.gguf");
    const std::string from = str("tokenizer.ggml.pre") + type + str("gpt-2");
    const size_t at = bytes.find(from);
    EXPECT_NE(at, std::string::npos) << "vocab-gpt2.gguf has no tokenizer.ggml.pre 'gpt-2'";
    if (at != std::string::npos) {
      bytes.replace(at, from.size(), str("tokenizer.ggml.pre") + type + str("bailingmoe"));
    }
    EXPECT_EQ(Sha256Hex(bytes), "3e5917fa7b40b1c481891e116342ebfff8fe85f0416d89956895bc418c862ecc");
    const std::string out = TempDir() + "/vocab-bailingmoe.gguf";
    WriteFileOrDie(out, bytes);
    return out;
  }();
  return path;
}

std::string TestDataPath(const std::string& relative) {
  if (relative == "tokenizer/vocab-bailingmoe.gguf") return BailingmoeVocabPath();
  return TestDataDir() + "/" + relative;
}

}  // namespace dllm::testing
