// Where tests find their data: `tests/data/` (always present) and the
// shared reference folder beside the checkout (present on developer and CI
// machines; tests that need it skip when it is absent).
#ifndef DLLM_TESTS_TESTING_TEST_PATHS_H_
#define DLLM_TESTS_TESTING_TEST_PATHS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"

namespace dllm::testing {

std::string TestDataDir();               // .../tests/data
std::optional<std::string> SharedDir();  // .../shared, when it exists
std::string BinaryDir();                 // the CMake build tree

// Every *.gguf model available to tests: tests/data/models, plus
// ../shared/models when present (deduplicated by file name).
std::vector<std::string> AllTestModels();

// A GoogleTest parameter name from a file path: its stem with every
// character other than a letter or digit made '_'.
std::string TestNameFromPath(const std::string& path);

// Reads a whole file; fails the test when it cannot.
std::string ReadFileOrDie(const std::string& path);
void WriteFileOrDie(const std::string& path, const std::string& bytes);

// A fresh temporary directory for this test.
std::string TempDir();

// `tokenizer/vocab-bailingmoe.gguf`: vocab-gpt2.gguf (the same vocabulary)
// with tokenizer.ggml.pre "bailingmoe", as scripts/make-vocab-gguf.py made
// it from tiny-llada-bailing-q8_0. Rebuilt once per process in a temporary
// directory, byte for byte (its sha256 is checked), rather than stored twice.
std::string BailingmoeVocabPath();
// tests/data/`relative`, or for tokenizer/vocab-bailingmoe.gguf its rebuilt copy.
std::string TestDataPath(const std::string& relative);

MATCHER(IsOk, "") {
  if (arg.ok()) return true;
  *result_listener << "status: " << arg;
  return false;
}

MATCHER_P2(StatusIs, code, substring, "") {
  const absl::Status& s = arg;
  if (s.code() == code && s.message().find(substring) != absl::string_view::npos) return true;
  *result_listener << "status: " << s;
  return false;
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_TESTING_TEST_PATHS_H_
