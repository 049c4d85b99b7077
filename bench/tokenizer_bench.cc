// Tokenizer speed: loading the 152k-token Qwen2 vocabulary (hash maps and
// merge table) and encoding / decoding mixed text with it.
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace {

const std::string& VocabPath() {
  static const std::string path = std::string(DLLM_TEST_DATA_DIR) + "/tokenizer/vocab-qwen2.gguf";
  return path;
}

std::string SampleText() {
  const std::string para =
      "The quick brown fox jumps over the lazy dog. def add(a, b):\n    return a + b\n"
      "Phone: 555-0123, year 2024. \xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c "
      "caf\xc3\xa9 na\xc3\xafve \xf0\x9f\x98\x80\n";
  std::string text;
  while (text.size() < (64u << 10)) text += para;
  return text;
}

void BM_LoadQwen2Vocab(benchmark::State& state) {
  auto file = dllm::GgufFile::Open(VocabPath());
  if (!file.ok()) {
    state.SkipWithError(std::string(file.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    auto tok = dllm::BpeTokenizer::FromGguf(*file);
    benchmark::DoNotOptimize(tok.ok());
  }
}
BENCHMARK(BM_LoadQwen2Vocab)->Unit(benchmark::kMillisecond);

void BM_EncodeDecode64KiB(benchmark::State& state) {
  auto file = dllm::GgufFile::Open(VocabPath());
  if (!file.ok()) {
    state.SkipWithError(std::string(file.status().message()).c_str());
    return;
  }
  auto tok = dllm::BpeTokenizer::FromGguf(*file);
  const std::string text = SampleText();
  size_t n_tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tok->Encode(text, true, true);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(tok->Decode(ids).ok());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
}
BENCHMARK(BM_EncodeDecode64KiB)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
