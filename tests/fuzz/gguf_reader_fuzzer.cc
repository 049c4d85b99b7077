// libFuzzer target: any byte string given to the GGUF reader (and the model
// config and compatibility checks behind `dllm inspect`) must give a status,
// never a crash, hang or runaway allocation.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<dllm::GgufFile> file = dllm::GgufFile::Parse(data, size, "fuzz.gguf");
  if (!file.ok()) return 0;
  absl::StatusOr<dllm::ModelConfig> config = dllm::ModelConfigFromGguf(*file);
  if (config.ok()) (void)dllm::CompatibilityProblems(*file, *config);
  for (const auto& [key, value] : file->metadata()) (void)dllm::GgufValueToString(value);
  return 0;
}
