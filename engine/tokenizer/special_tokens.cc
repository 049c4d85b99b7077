#include "engine/tokenizer/special_tokens.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/tokenizer/pre_tokenizer.h"

namespace dllm {
namespace {

absl::Status InvalidKey(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", key, ": ", why));
}

}  // namespace

std::vector<int32_t> SpecialTokens::StopIds() const {
  std::vector<int32_t> ids;
  const auto add = [&ids](int32_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  add(eos);
  add(eot);
  for (int32_t id : stop_texts) add(id);
  return ids;
}

std::string OutsideVocabulary(int64_t id, int64_t n_vocab) {
  if (id >= 0 && id < n_vocab) return "";
  return absl::StrCat("is outside the vocabulary of ", n_vocab);
}

std::string NotAGivenToken(int64_t id, int64_t n_vocab, int32_t mask) {
  if (std::string why = OutsideVocabulary(id, n_vocab); !why.empty()) return why;
  return id == mask ? "is the mask token" : "";
}

absl::Status MarkStopTexts(const GgufFile& file, std::span<const char* const> texts,
                           SpecialTokens* tokens) {
  if (!file.HasKey("tokenizer.ggml.tokens")) return absl::OkStatus();
  DLLM_ASSIGN_OR_RETURN(const std::vector<absl::string_view> vocab,
                        file.GetStringArray("tokenizer.ggml.tokens"));
  for (size_t id = 0; id < vocab.size(); ++id) {
    for (const char* text : texts) {
      if (vocab[id] == text) tokens->stop_texts.push_back(static_cast<int32_t>(id));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SpecialTokens> ReadSpecialTokens(const GgufFile& file, int64_t n_vocab) {
  SpecialTokens t;
  struct IdKey {
    const char* key;
    int32_t* id;
  };
  for (const IdKey& k :
       {IdKey{"tokenizer.ggml.bos_token_id", &t.bos}, IdKey{"tokenizer.ggml.eos_token_id", &t.eos},
        IdKey{"tokenizer.ggml.eot_token_id", &t.eot},
        IdKey{"tokenizer.ggml.padding_token_id", &t.pad},
        IdKey{"tokenizer.ggml.mask_token_id", &t.mask}}) {
    if (!file.HasKey(k.key)) continue;
    DLLM_ASSIGN_OR_RETURN(int64_t id, file.GetInt(k.key));
    if (id < 0 || id >= n_vocab) {
      return InvalidKey(k.key,
                        absl::StrCat("token id ", id, " is outside the vocabulary of ", n_vocab));
    }
    *k.id = static_cast<int32_t>(id);
  }
  DLLM_ASSIGN_OR_RETURN(absl::string_view pre, file.GetStringOr("tokenizer.ggml.pre", ""));
  const absl::StatusOr<PreTokenizer> parsed = ParsePreTokenizer(pre);
  const bool llama3 = parsed.ok() && *parsed == PreTokenizer::kLlama3;
  DLLM_ASSIGN_OR_RETURN(t.add_bos, file.GetBoolOr("tokenizer.ggml.add_bos_token", llama3));
  // llama.cpp adds BOS for Gemma 4's vocabulary whatever the key says.
  DLLM_ASSIGN_OR_RETURN(absl::string_view model, file.GetStringOr("tokenizer.ggml.model", ""));
  if (model == "gemma4") t.add_bos = true;
  DLLM_ASSIGN_OR_RETURN(t.add_eos, file.GetBoolOr("tokenizer.ggml.add_eos_token", false));
  if (t.add_bos && t.bos < 0) {
    return InvalidKey("tokenizer.ggml.add_bos_token", "true, but there is no bos_token_id");
  }
  if (t.add_eos && t.eos < 0) {
    return InvalidKey("tokenizer.ggml.add_eos_token", "true, but there is no eos_token_id");
  }
  return t;
}

}  // namespace dllm
