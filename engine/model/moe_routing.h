// Token routing of a mixture-of-experts FFN, as llama.cpp's build_moe_ffn
// does it: softmax gating for llada-moe, rnd1 and DiffusionGemma (softmax
// over all expert logits, the k most probable experts, their probabilities
// as weights, renormalised to sum 1 where the model says, the sum clamped
// below at 2^-14); sigmoid gating for LLaDA2 (each logit's sigmoid, an
// expert bias added to choose, group-limited choice, the chosen sigmoids
// renormalised and scaled). Then the rows each expert serves are gathered
// so that every expert runs one GEMM.
#ifndef DLLM_ENGINE_MODEL_MOE_ROUTING_H_
#define DLLM_ENGINE_MODEL_MOE_ROUTING_H_

#include <cstdint>
#include <span>

#include "engine/model/model_config.h"

namespace dllm {

// llama.cpp's floor for the sum of renormalised weights (the smallest
// normal F16).
inline constexpr float kMoeWeightSumFloor = 6.103515625e-5f;

// How one layer routes (LayerConfig's routing fields).
struct RoutingRule {
  RouterScore score = RouterScore::kSoftmax;
  int64_t k = 1;                // experts per row
  bool normalize = false;       // chosen weights renormalised to sum 1
  float scale = 1.0f;           // then multiplied by this
  const float* bias = nullptr;  // (n_expert) added to the scores to choose; may be null
  int64_t groups = 1;           // consecutive runs of n_expert / groups experts
  int64_t groups_used = 1;      // the best groups (by the sum of their two best) eligible
};
RoutingRule RoutingRuleOf(const LayerConfig& layer, const float* expert_bias);

// For one row of router `logits` (n_expert): the `rule.k` experts chosen,
// best first (ties go to the lower index; llama.cpp's sort leaves their
// order unspecified), into `experts` (k), and their weights into `weights`
// (k). `scores` is 3 x n_expert and `order` n_expert of scratch. Allocates
// nothing.
void RouteRow(const float* logits, int64_t n_expert, const RoutingRule& rule, float* scores,
              int32_t* order, int32_t* experts, float* weights);

// The routed rows grouped by expert: `rows[offset[e] .. offset[e + 1])` are
// the rows expert e serves, ascending, and `slot` the matching index into
// that row's k choices. Filled by GroupByExpert from `experts` (m x k).
struct ExpertGroups {
  std::span<int32_t> offset;  // n_expert + 1
  std::span<int32_t> next;    // n_expert, scratch
  std::span<int32_t> rows;    // m * k
  std::span<int32_t> slot;    // m * k
  int64_t count(int64_t e) const { return offset[e + 1] - offset[e]; }
};
void GroupByExpert(const int32_t* experts, int64_t m, int64_t k, int64_t n_expert,
                   ExpertGroups* groups);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_MOE_ROUTING_H_
