// A projection weight W (n_out x n_in, GGUF order: n_in = ne[0]) prepared at
// load for Y = X · Wᵀ, and its parallel application.
//
// Two paths, chosen by the file's type:
// - quantized types (Q4_0 ... Q8_0, K-quants) are repacked once into the
//   int8 panel layout of kernels/quantized_matrix.h and the mapped pages are
//   released, so one copy stays resident; activations are quantized to int8
//   per 32 values (as llama.cpp does for these types);
// - F32/F16/BF16 stay in the mapping and run with float32 activations and
//   float32 accumulation (kernels/gemm_float.h), which keeps float models
//   within 1e-3 of exact math.
// Output tiles are handed out dynamically by oneTBB in both paths.
#ifndef DLLM_ENGINE_MODEL_LINEAR_H_
#define DLLM_ENGINE_MODEL_LINEAR_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/parallel/per_thread.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm.h"
#include "kernels/gemm_float.h"
#include "kernels/quantize_act.h"
#include "kernels/quantized_matrix.h"

namespace dllm {

// What Apply() works in: int8 activation rows (quantized weights) or
// per-worker float panels of `FloatGemmScratchFloats(n_in)` (float weights).
struct LinearScratch {
  const QuantizedRows* xq = nullptr;
  PerThread<std::vector<float>>* panels = nullptr;
};

// Why `tensor` cannot become a Linear for the kernels, or "" when it can:
// the one check Create() and the compatibility report share.
std::string LinearProblem(const GgufTensor& tensor);

class Linear {
 public:
  // Prepares `tensor` (2-D, a supported type) for the kernels of `isa`. With
  // `release_mapping`, the tensor's mapped pages are dropped after repacking
  // (pass false when the bytes are read elsewhere, e.g. a tied embedding).
  static absl::StatusOr<Linear> Create(const GgufTensor& tensor, IsaLevel isa,
                                       bool release_mapping);

  Linear(Linear&&) = default;
  Linear& operator=(Linear&&) = default;

  int64_t n_in() const { return n_in_; }
  int64_t n_out() const { return n_out_; }
  GgmlType type() const { return type_; }
  // Whether Apply() needs int8 activation scratch (QuantizedRowsBytes(m, n_in)).
  bool int8() const { return packed_ != nullptr; }
  // Bytes this weight keeps beyond the mapped file (the repacked copy).
  size_t owned_bytes() const { return packed_bytes_; }

  // y[r, :] = x[rows ? rows[r] : r, :] · Wᵀ for r in [0, m), in parallel in
  // the calling thread's task arena. `scratch.xq` needs at least m rows of
  // n_in; one call at a time per `xq`. Allocates nothing.
  void Apply(const float* x, int64_t ldx, const int32_t* rows, int64_t m, float* y, int64_t ldy,
             const LinearScratch& scratch) const;

  // The same for an input already quantized: y[r, :] = xq[r] · Wᵀ for
  // r in [0, m), when several int8 projections read one input. Needs int8().
  void ApplyQuantized(const QuantizedRows& xq, int64_t m, float* y, int64_t ldy) const;

 private:
  Linear() = default;
  struct FreeAligned {
    void operator()(uint8_t* p) const { std::free(p); }
  };

  GgmlType type_ = GgmlType::kF32;
  int64_t n_in_ = 0, n_out_ = 0;
  // Float path: rows of the mapped tensor.
  const void* weights_ = nullptr;
  size_t row_bytes_ = 0;
  FloatGemmTileFn float_tile_ = nullptr;
  // Int8 path.
  std::unique_ptr<uint8_t, FreeAligned> packed_;
  size_t packed_bytes_ = 0;
  QuantizedMatrix view_;
  const GemmKernels* kernels_ = nullptr;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_LINEAR_H_
