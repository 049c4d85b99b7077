// Comparing a forward pass with stored reference logits in the format of
// ../shared/reference/logits/ (README there): a JSON per canvas with the
// tokens, `cols` and `full_rows`, plus `<canvas>.cols.f32` (n_tokens x
// cols) and `<canvas>.full.f32` (the full rows). Used for llama.cpp's logits
// and for float64 "exact" logits alike.
#ifndef DLLM_TESTS_TESTING_LOGITS_REFERENCE_H_
#define DLLM_TESTS_TESTING_LOGITS_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "service/json/json.h"

namespace dllm::testing {

struct LogitsDiff {
  double max_abs = 0, rms = 0, min_cosine = 1;
  int top1_agree = 0, top1_total = 0;
  int top1_required_fail = 0;   // disagreements where the reference margin is >= 0.5
  std::vector<double> row_rms;  // per canvas row, over the stored columns
};

// `logits` (L x V, every row) against the reference canvas `ref` whose
// files start with `base` (the JSON path without ".json"): max and rms over
// every stored value, the cosine of each full row, and top-1 agreement with
// the reference's `row_stats`.
LogitsDiff CompareWithReference(const std::vector<float>& logits, int64_t L, int64_t V,
                                const Json& ref, const std::string& base);

std::vector<float> ReadFloats(const std::string& path);
std::vector<int32_t> ReferenceTokens(const Json& ref);

}  // namespace dllm::testing

#endif  // DLLM_TESTS_TESTING_LOGITS_REFERENCE_H_
