#include "engine/model/linear.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/parallel/parallel_gemm.h"

namespace dllm {

namespace {

bool IsFloatType(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

}  // namespace

std::string LinearProblem(const GgufTensor& t) {
  if (!TraitsOf(t.type).supported) {
    return absl::StrCat("unsupported tensor type ", GgmlTypeName(t.type), " for tensor ", t.name);
  }
  if (!IsFloatType(t.type) && (!PackSupported(t.type) || t.ne[0] % PackKMultiple(t.type) != 0)) {
    return absl::StrCat("unsupported layout: tensor '", t.name, "' (", GgmlTypeName(t.type),
                        ", row ", t.ne[0], ") cannot be repacked for the int8 kernels");
  }
  return "";
}

absl::StatusOr<Linear> Linear::Create(const GgufTensor& t, IsaLevel isa, bool release_mapping) {
  if (t.n_dims != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", t.name, "' has ", t.n_dims, " dimensions, expected 2"));
  }
  if (const std::string problem = LinearProblem(t); !problem.empty()) {
    return absl::UnimplementedError(problem);
  }
  Linear l;
  l.type_ = t.type;
  l.n_in_ = t.ne[0];
  l.n_out_ = t.ne[1];
  if (IsFloatType(t.type)) {
    l.weights_ = t.data;
    l.row_bytes_ = RowBytes(t.type, l.n_in_);
    l.float_tile_ = SelectFloatGemm(isa);
    return l;
  }
  l.packed_bytes_ = PackedBytes(t.type, l.n_out_, l.n_in_);
  void* storage = std::aligned_alloc(64, (l.packed_bytes_ + 63) / 64 * 64);
  if (storage == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", l.packed_bytes_,
                                                     " bytes to repack tensor '", t.name, "'"));
  }
  l.packed_.reset(static_cast<uint8_t*>(storage));
  // Pack a slice of panels at a time and drop the source pages it read, so
  // the file's copy and the packed copy never both stay resident (the
  // largest tensor, an 8B model's head, is half a gigabyte).
  l.view_ = PackedView(t.type, l.n_out_, l.n_in_, l.packed_.get());
  const int64_t panels = l.view_.num_panels();
  const size_t src_row = RowBytes(t.type, l.n_in_);
  constexpr int64_t kPanelsPerSlice = 64;
  for (int64_t p0 = 0; p0 < panels; p0 += kPanelsPerSlice) {
    const int64_t p1 = std::min(panels, p0 + kPanelsPerSlice);
    tbb::parallel_for(p0, p1, [&](int64_t p) { PackPanels(l.view_, t.data, p, p + 1); });
    if (release_mapping) {
      const int64_t row0 = p0 * kPanelRows, row1 = std::min(l.n_out_, p1 * kPanelRows);
      ReleaseMappedRange(t.data + row0 * src_row, static_cast<size_t>(row1 - row0) * src_row);
    }
  }
  l.kernels_ = &SelectGemmKernels(isa);
  return l;
}

void Linear::ApplyQuantized(const QuantizedRows& xq, int64_t m, float* y, int64_t ldy) const {
  DLLM_CHECK(int8() && xq.cols == n_in_ && xq.rows >= m);
  if (m == 0) return;
  GemmArgs args;
  args.w = &view_;
  args.x = &xq;
  args.y = y;
  args.y_stride = ldy;
  args.num_rows = m;
  ParallelGemm(*kernels_, args);
}

void Linear::Apply(const float* x, int64_t ldx, const int32_t* rows, int64_t m, float* y,
                   int64_t ldy, const LinearScratch& scratch) const {
  if (m == 0) return;
  if (int8()) {
    // The scratch is sized for the widest input of its slot (layers differ:
    // a sliding layer's attention output, an expert's hidden width); a
    // narrower input is laid out afresh at the start of the same buffer.
    const QuantizedRows xq = scratch.xq->cols == n_in_
                                 ? *scratch.xq
                                 : CarveQuantizedRows(scratch.xq->q, scratch.xq->rows, n_in_);
    ParallelQuantizeRows(x, ldx, rows, m, xq);
    ApplyQuantized(xq, m, y, ldy);
    return;
  }
  FloatGemmArgs a;
  a.type = type_;
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
  const FloatGemmTileFn tile_fn = float_tile_;
  PerThread<std::vector<float>>& panels = *scratch.panels;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, FloatGemmTiles(a), 1),
      [&](const tbb::blocked_range<int64_t>& range) {
        std::vector<float>& s = panels.Local();
        DLLM_CHECK(static_cast<int64_t>(s.size()) >= FloatGemmScratchFloats(n_in_));
        for (int64_t t = range.begin(); t != range.end(); ++t) tile_fn(a, t, s.data());
      },
      tbb::simple_partitioner());
}

}  // namespace dllm
