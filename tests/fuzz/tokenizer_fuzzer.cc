// libFuzzer target for the tokenizer. Each input is used twice: as text for
// the Qwen2 test vocabulary, where encoding must not crash and decoding must
// give the input back byte for byte; and as a GGUF file, whose tokenizer
// section must load to a tokenizer or a status, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace {

const dllm::BpeTokenizer& QwenTokenizer() {
  static const auto* file = [] {
    auto f = dllm::GgufFile::Open(std::string(DLLM_TEST_DATA_DIR) + "/tokenizer/vocab-qwen2.gguf");
    if (!f.ok()) {
      std::fprintf(stderr, "tokenizer_fuzzer: %s\n", std::string(f.status().message()).c_str());
      std::abort();
    }
    return new dllm::GgufFile(std::move(*f));
  }();
  static const auto* tok = [] {
    auto t = dllm::BpeTokenizer::FromGguf(*file);
    if (!t.ok()) std::abort();
    return new dllm::BpeTokenizer(std::move(*t));
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const dllm::BpeTokenizer& qwen = QwenTokenizer();
  for (bool parse_special : {false, true}) {
    auto decoded = qwen.Decode(qwen.Encode(text, false, parse_special));
    if (!decoded.ok() || *decoded != text) std::abort();
  }
  dllm::StreamingDecoder stream(&qwen);
  for (int32_t id : qwen.Encode(text, true, true)) (void)stream.Push(id);
  (void)stream.Finish();

  auto file = dllm::GgufFile::Parse(data, size, "fuzz.gguf");
  if (!file.ok()) return 0;
  auto tok = dllm::BpeTokenizer::FromGguf(*file);
  if (!tok.ok()) return 0;
  const std::vector<int32_t> ids =
      tok->Encode("Hello, world! <|im_start|> 123 caf\xc3\xa9", true, true);
  (void)tok->Decode(ids);
  return 0;
}
