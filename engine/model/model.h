// A loaded diffusion LM (LLaDA, Dream, LLaDA-MoE, RND1, DiffusionGemma): the mapped GGUF, its
// config and the weights prepared for the kernels. Immutable after Load();
// share it as std::shared_ptr<const Model>.
#ifndef DLLM_ENGINE_MODEL_MODEL_H_
#define DLLM_ENGINE_MODEL_MODEL_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/layer_weights.h"
#include "engine/model/linear.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/chat_template.h"
#include "kernels/cpu_features.h"

namespace dllm {

struct ModelOptions {
  IsaLevel isa = IsaLevel::kScalar;  // kernel path; clamp with BestIsaLevel()
  // Replaces the chat template the file's metadata calls for (the operator's
  // --chat-template).
  std::optional<ChatTemplate> chat_template;
};

// What Load() reads and checks before it repacks anything: the
// hyperparameters, every tensor's type and shape, the tokenizer (model,
// pre-tokenizer, special tokens) and the chat template. OK means Load()
// accepts the file (memory permitting); `dllm inspect` and `dllm doctor` run
// this very check, so their "compatible" cannot disagree with the loader.
struct ModelSpec {
  ModelConfig config;
  std::unique_ptr<BpeTokenizer> tokenizer;
  ChatTemplate chat_template;
};
absl::StatusOr<ModelSpec> ReadModelSpec(const GgufFile& file);

class Model {
 public:
  static absl::StatusOr<std::shared_ptr<const Model>> Load(const std::string& path,
                                                           const ModelOptions& options);

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return file_; }
  IsaLevel isa() const { return options_.isa; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const GgufTensor& token_embd() const { return *token_embd_; }
  const float* output_norm() const { return output_norm_; }
  const Linear& output() const { return *output_; }
  // Empty unless config().self_conditioning.
  const SelfConditioningWeights& self_conditioning() const { return self_conditioning_; }
  const BpeTokenizer& tokenizer() const { return *tokenizer_; }
  // The chat template the file's metadata calls for (ChatML when it has none
  // or one dllm does not recognise), unless ModelOptions replaced it.
  const ChatTemplate& chat_template() const { return chat_template_; }
  // Bytes of repacked weights the model owns (beyond the mapped file).
  size_t owned_weight_bytes() const { return owned_weight_bytes_; }
  // Bytes of the file the model still reads (metadata, token_embd, norms,
  // biases, float weights): copied at load to the addresses they were
  // mapped at, detached from the file.
  size_t file_bytes_kept() const { return file_bytes_kept_; }

 private:
  explicit Model(GgufFile file) : file_(std::move(file)) {}

  GgufFile file_;
  ModelConfig config_;
  ModelOptions options_;
  const GgufTensor* token_embd_ = nullptr;
  const float* output_norm_ = nullptr;
  std::unique_ptr<Linear> output_;
  std::unique_ptr<BpeTokenizer> tokenizer_;
  ChatTemplate chat_template_;
  std::vector<LayerWeights> layers_;
  SelfConditioningWeights self_conditioning_;
  size_t owned_weight_bytes_ = 0;
  size_t file_bytes_kept_ = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_MODEL_H_
