#include "engine/model/linear.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/dequant.h"

namespace dllm {

absl::StatusOr<Linear> Linear::Create(const GgufTensor& t, IsaLevel isa) {
  if (t.n_dims != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", t.name, "' has ", t.n_dims, " dimensions, expected 2"));
  }
  if (!TraitsOf(t.type).supported) {
    return absl::UnimplementedError(absl::StrCat("unsupported tensor type ",
                                                 GgmlTypeName(t.type), " for tensor ", t.name));
  }
  Linear l;
  l.type_ = t.type;
  l.n_in_ = t.ne[0];
  l.n_out_ = t.ne[1];
  l.tile_fn_ = SelectFloatGemm(isa);
  if (t.type == GgmlType::kF32 || t.type == GgmlType::kF16 || t.type == GgmlType::kBF16) {
    l.weights_ = t.data;
    l.row_bytes_ = RowBytes(t.type, l.n_in_);
    l.kernel_type_ = t.type;
    return l;
  }
  l.owned_.resize(static_cast<size_t>(l.n_in_ * l.n_out_));
  const size_t src_row = RowBytes(t.type, l.n_in_);
  for (int64_t r = 0; r < l.n_out_; ++r) {
    DequantizeRow(t.type, t.data + r * src_row, l.owned_.data() + r * l.n_in_, l.n_in_);
  }
  l.weights_ = l.owned_.data();
  l.row_bytes_ = static_cast<size_t>(l.n_in_) * sizeof(float);
  l.kernel_type_ = GgmlType::kF32;
  return l;
}

void Linear::Apply(const float* x, int64_t ldx, const int32_t* rows, int64_t m, float* y,
                   int64_t ldy) const {
  FloatGemmArgs a;
  a.type = kernel_type_;
  a.w = weights_;
  a.w_row_bytes = row_bytes_;
  a.n = n_out_;
  a.k = n_in_;
  a.x = x;
  a.ldx = ldx;
  a.rows = rows;
  a.m = m;
  a.y = y;
  a.ldy = ldy;
  // Per-thread panel scratch; TBB keeps one per worker across calls.
  static tbb::enumerable_thread_specific<std::vector<float>> scratch;
  const int64_t tiles = FloatGemmTiles(a);
  const FloatGemmTileFn tile_fn = tile_fn_;
  const int64_t need = scratch_floats();
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, tiles, 1),
                    [&](const tbb::blocked_range<int64_t>& range) {
                      std::vector<float>& s = scratch.local();
                      if (static_cast<int64_t>(s.size()) < need) s.resize(need);
                      for (int64_t t = range.begin(); t != range.end(); ++t) {
                        tile_fn(a, t, s.data());
                      }
                    });
}

}  // namespace dllm
