// A projection weight W (n_out x n_in, GGUF order: n_in = ne[0]) prepared at
// load for Y = X · Wᵀ, and the parallel driver that runs its output tiles
// through oneTBB (tiles are handed out dynamically, never split statically).
#ifndef DLLM_ENGINE_MODEL_LINEAR_H_
#define DLLM_ENGINE_MODEL_LINEAR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_reader.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_float.h"

namespace dllm {

class Linear {
 public:
  // Prepares `tensor` (2-D, a supported type) for the kernels of `isa`.
  static absl::StatusOr<Linear> Create(const GgufTensor& tensor, IsaLevel isa);

  Linear(Linear&&) = default;
  Linear& operator=(Linear&&) = default;

  int64_t n_in() const { return n_in_; }
  int64_t n_out() const { return n_out_; }
  GgmlType type() const { return type_; }
  // Bytes this weight keeps resident beyond the mapped file (repacked copies).
  size_t owned_bytes() const { return owned_.size() * sizeof(float); }

  // y[r, :] = x[rows ? rows[r] : r, :] · Wᵀ for r in [0, m), in parallel in
  // the calling thread's task arena. `scratch_floats()` per worker thread.
  void Apply(const float* x, int64_t ldx, const int32_t* rows, int64_t m, float* y,
             int64_t ldy) const;

  int64_t scratch_floats() const { return FloatGemmScratchFloats(n_in_); }

 private:
  Linear() = default;

  GgmlType type_ = GgmlType::kF32;
  int64_t n_in_ = 0, n_out_ = 0;
  const void* weights_ = nullptr;  // non-owning: the mapping or `owned_`
  size_t row_bytes_ = 0;
  GgmlType kernel_type_ = GgmlType::kF32;  // what the kernel reads
  FloatGemmTileFn tile_fn_ = nullptr;
  // TODO(#3): quantized weights are expanded to float here until the int8
  // repacked kernels land; this costs memory and speed, not accuracy.
  std::vector<float> owned_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_LINEAR_H_
