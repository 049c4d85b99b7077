// GEMM kernel tables and tiling (see gemm.h).
#include "kernels/gemm.h"

#include <algorithm>

#include "kernels/gemm_internal.h"

namespace dllm {
namespace {

struct AllKernels {
  GemmKernels by_level[4];
  GemmKernels plain_avx2;  // kAvx2's table where by_level[1] runs AVX-VNNI
  AllKernels() {
    for (int l = 0; l < 4; ++l) by_level[l].isa = static_cast<IsaLevel>(l);
    plain_avx2.isa = IsaLevel::kAvx2;
    gemm_internal::FillScalarKernels(&by_level[0]);
    gemm_internal::FillAvx2Kernels(&plain_avx2);
    if (GetCpuFeatures().avx_vnni) {
      gemm_internal::FillAvxVnniKernels(&by_level[1]);
    } else {
      gemm_internal::FillAvx2Kernels(&by_level[1]);
    }
    gemm_internal::FillAvx512VnniKernels(&by_level[2]);
    gemm_internal::FillAmxKernels(&by_level[3]);
  }
};

const AllKernels& All() {
  static const AllKernels all;
  return all;
}

}  // namespace

const GemmKernels& SelectGemmKernels(IsaLevel level) {
  return All().by_level[static_cast<int>(level)];
}

std::vector<NamedGemmKernels> RunnableGemmKernels() {
  std::vector<NamedGemmKernels> out;
  for (IsaLevel level : SupportedIsaLevels()) {
    const bool vnni = level == IsaLevel::kAvx2 && GetCpuFeatures().avx_vnni;
    if (vnni) out.push_back({"avx2", &All().plain_avx2});
    out.push_back({vnni ? "avxvnni" : IsaLevelName(level), &SelectGemmKernels(level)});
  }
  return out;
}

GemmTiling PlanGemmTiles(const GemmKernels& kernels, const GemmArgs& args, int num_threads) {
  constexpr int64_t kMaxTileRows = 128;  // X rows streamed over one weight panel block
  constexpr int64_t kMinTilesPerThread = 8;
  const int64_t row_block = std::max(kernels.row_block, 1);
  const int64_t panel_block = std::max(kernels.panel_block, 1);
  GemmTiling t;
  const int64_t rows = std::max<int64_t>(args.num_rows, 1);
  const int64_t panels = args.w->num_panels();
  // A tile's activation rows are read once per weight panel block, so they
  // should stay in L2: long K means fewer rows. (On Zen 5's 1 MB L2, 512 KB
  // to 1 MB measured alike within the VM's noise, 256 KB clearly slower.)
  constexpr int64_t kActBytesInL2 = 768 * 1024;
  const int64_t max_rows = std::clamp<int64_t>(
      kActBytesInL2 / std::max<int64_t>(args.w->cols, 1) / row_block * row_block,
      std::max<int64_t>(16, row_block), kMaxTileRows);
  t.tile_rows = std::min(rows, max_rows);
  if (rows > max_rows) {  // equal heights, whole row blocks
    const int64_t n = (rows + max_rows - 1) / max_rows;
    t.tile_rows = ((rows + n - 1) / n + row_block - 1) / row_block * row_block;
  }
  t.row_tiles = (rows + t.tile_rows - 1) / t.tile_rows;
  const int64_t want = kMinTilesPerThread * std::max(num_threads, 1);
  // Whole panel blocks per tile, rounded down so there are at least as many
  // tiles as wanted.
  const int64_t blocks = (panels + panel_block - 1) / panel_block;
  const int64_t want_panel_tiles = std::max<int64_t>(1, (want + t.row_tiles - 1) / t.row_tiles);
  t.tile_panels = std::min(panels, std::max<int64_t>(1, blocks / want_panel_tiles) * panel_block);
  t.panel_tiles = (panels + t.tile_panels - 1) / t.tile_panels;
  if (args.num_rows == 0) t.row_tiles = 0;
  return t;
}

void RunGemmTile(const GemmKernels& kernels, const GemmArgs& args, const GemmTiling& tiling,
                 int64_t tile) {
  const int64_t rt = tile % tiling.row_tiles;
  const int64_t pt = tile / tiling.row_tiles;
  const int64_t r0 = rt * tiling.tile_rows;
  const int64_t r1 = std::min(args.num_rows, r0 + tiling.tile_rows);
  const int64_t p0 = pt * tiling.tile_panels;
  const int64_t p1 = std::min(args.w->num_panels(), p0 + tiling.tile_panels);
  kernels.tile[static_cast<int>(args.w->kind)](args, r0, r1, p0, p1);
}

void Gemm(const GemmKernels& kernels, const GemmArgs& args) {
  const GemmTiling t = PlanGemmTiles(kernels, args, 1);
  for (int64_t i = 0; i < t.num_tiles(); ++i) RunGemmTile(kernels, args, t, i);
}

}  // namespace dllm
