// libFuzzer target: any byte string given to the GGUF reader and to every
// check the loader makes before repacking (ReadModelSpec: hyperparameters,
// the MoE expert keys, tensor layout, tokenizer, chat template; what `dllm
// inspect` reports) must give a status, never a crash, hang or runaway
// allocation. scripts/fuzz seeds it with dense, MoE and diffusion-gemma files.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<dllm::GgufFile> file = dllm::GgufFile::Parse(data, size, "fuzz.gguf");
  if (!file.ok()) return 0;
  absl::StatusOr<dllm::ModelConfig> config = dllm::ModelConfigFromGguf(*file);
  if (config.ok()) (void)dllm::CompatibilityProblems(*file, *config);
  (void)dllm::ReadModelSpec(*file);
  for (const auto& [key, value] : file->metadata()) (void)dllm::GgufValueToString(value);
  return 0;
}
