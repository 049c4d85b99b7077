// Token routing of a mixture-of-experts FFN, as llama.cpp's build_moe_ffn
// does it for llada-moe and rnd1 (softmax gating): softmax over all expert
// logits, the k most probable experts, their probabilities as weights
// (renormalised to sum 1 for rnd1, the sum clamped below at 2^-14), and the
// rows each expert serves gathered so that every expert runs one GEMM.
#ifndef DLLM_ENGINE_MODEL_MOE_ROUTING_H_
#define DLLM_ENGINE_MODEL_MOE_ROUTING_H_

#include <cstdint>
#include <span>

namespace dllm {

// llama.cpp's floor for the sum of renormalised weights (the smallest
// normal F16).
inline constexpr float kMoeWeightSumFloor = 6.103515625e-5f;

// For one row of `logits` (n_expert): the `k` most probable experts, best
// first (ties go to the lower index; llama.cpp's std::sort leaves their order
// unspecified), into `experts` (k), and their weights into `weights` (k).
// `probs` and `order` are n_expert of scratch. Allocates nothing.
void RouteRow(const float* logits, int64_t n_expert, int64_t k, bool normalize_weights,
              float* probs, int32_t* order, int32_t* experts, float* weights);

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
