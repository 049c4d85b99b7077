// How long opening a GGUF takes (header, metadata, tokenizer arrays).
#include <string>

#include "benchmark/benchmark.h"
#include "engine/gguf/gguf_reader.h"

namespace {

void BM_OpenGguf(benchmark::State& state) {
  const std::string path = std::string(DLLM_TEST_DATA_DIR) + "/models/tiny-dream-k-q4_k_m.gguf";
  for (auto _ : state) {
    auto file = dllm::GgufFile::Open(path);
    if (!file.ok()) {
      state.SkipWithError(std::string(file.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(file->tensors().size());
  }
}
BENCHMARK(BM_OpenGguf)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
