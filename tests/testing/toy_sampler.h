// The toy setting the sampler tests share: an 8-token vocabulary, a mask id
// outside it (never sampled), EOS 7, a 3-token prompt, and configs of each
// family built from the struct (no model defaults).
#ifndef DLLM_TESTS_TESTING_TOY_SAMPLER_H_
#define DLLM_TESTS_TESTING_TOY_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "engine/sampler/sampler_config.h"
#include "engine/tokenizer/special_tokens.h"

namespace dllm::testing::toy {

inline constexpr int kVocab = 8;
inline constexpr int32_t kMask = 100;  // outside the vocabulary: never sampled
inline constexpr int32_t kEos = 7;
inline const std::vector<int32_t> kPrompt = {1, 2, 3};

inline SpecialTokens Special() {
  SpecialTokens s;
  s.mask = kMask;
  s.eos = kEos;
  return s;
}

inline SamplerConfig Llada(int gen, int steps, int block) {
  SamplerConfig c;
  c.family = SamplerFamily::kLlada;
  c.gen_length = gen;
  c.steps = steps;
  c.block_length = block;
  return c;
}

inline SamplerConfig Dream(int gen, int steps, Algorithm alg = Algorithm::kMaskgitPlus) {
  SamplerConfig c;
  c.family = SamplerFamily::kDream;
  c.shift_logits = true;
  c.gen_length = gen;
  c.steps = steps;
  c.algorithm = alg;
  return c;
}

}  // namespace dllm::testing::toy

#endif  // DLLM_TESTS_TESTING_TOY_SAMPLER_H_
