#include "engine/model/forward_batch.h"

#include <algorithm>

namespace dllm {

absl::string_view MaskKindName(MaskKind kind) {
  switch (kind) {
    case MaskKind::kBidirectional:
      return "bidirectional";
    case MaskKind::kBlockCausal:
      return "block-causal";
    case MaskKind::kPromptCausal:
      return "prompt-causal";
  }
  return "?";
}

namespace {

// The bidirectional region [begin, end) that holds row `p`.
KeyRange RegionOf(const AttentionMask& mask, int32_t p, int32_t n) {
  switch (mask.kind) {
    case MaskKind::kBidirectional:
      break;
    case MaskKind::kBlockCausal: {
      const int32_t begin = p / mask.block_length * mask.block_length;
      return {begin, std::min(n, begin + mask.block_length)};
    }
    case MaskKind::kPromptCausal:
      if (p < mask.prompt_length) return {p, p + 1};
      return {mask.prompt_length, n};
  }
  return {0, n};
}

}  // namespace

KeyRange KeysOf(const AttentionMask& mask, int32_t window, int32_t p, int32_t n) {
  const KeyRange region = RegionOf(mask, p, n);
  return {window > 0 ? std::max(0, region.begin - (window - 1)) : 0, region.end};
}

bool ReadsWholeCanvas(const AttentionMask& mask, int32_t n) {
  const KeyRange first = RegionOf(mask, 0, n);
  return first.begin == 0 && first.end == n;
}

}  // namespace dllm
