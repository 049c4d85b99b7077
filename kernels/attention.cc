// Picks the attention kernel for an ISA level.
#include "kernels/attention.h"

namespace dllm {

void AttentionScalar(const AttentionShape&, const float*, const float*, const float*, float*, int,
                     int, int, const KeyRange*, float*);
void AttentionAvx2(const AttentionShape&, const float*, const float*, const float*, float*, int,
                   int, int, const KeyRange*, float*);
void AttentionAvx512(const AttentionShape&, const float*, const float*, const float*, float*, int,
                     int, int, const KeyRange*, float*);

AttentionFn SelectAttention(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar:
      return &AttentionScalar;
    case IsaLevel::kAvx2:
      return &AttentionAvx2;
    case IsaLevel::kAvx512Vnni:
    case IsaLevel::kAmx:
      return &AttentionAvx512;
  }
  return &AttentionScalar;
}

}  // namespace dllm
