// Weight matrices repacked once at load into the one layout every GEMM path
// (scalar, AVX2/AVX-VNNI, AVX-512 VNNI, AMX) reads, and the non-owning view
// of it. The layout does not depend on the ISA, so one packed copy serves
// every path and `--isa` can change without repacking. Issue #23 kept it so
// on purpose: the register-blocked kernels read several 16-row panels side
// by side instead of wanting wider panels, the scales they need per chunk
// are formed once per chunk from the stored ones (so pre-multiplied scales
// would save little and cost memory), and only the 6-bit layout changed, to
// one every path unpacks in fewer operations.
//
// Packing scheme. Every supported GGUF type is rewritten as unsigned integer
// codes `u` with, per scale group of S elements of a row, a float scale `d`
// and a float offset `c`, such that the dequantized weight is
//     w = d * u + c_elem  with  sum_group(w * x) = d * sum(u * x) + c * sum(x).
// (`c` is the whole group's additive term: Q4_0 has c = -8 d, Q4_1 c = m,
// Q4_K c = -dmin * m_j, Q6_K c = -32 d sc, ...). Codes are stored 4-bit when
// the format has 4-bit codes (Q4_0, Q4_1, Q4_K), 6-bit for Q6_K, and as
// bytes otherwise.
// Unsigned codes let VNNI's `vpdpbusd` (u8 x s8) and AMX's `tdpbsud`
// (s8 x u8) take the weights as the unsigned operand with no sign trick.
//
// Layout. Rows are grouped into panels of 16 rows (the last one padded with
// zero rows); a panel stores, for each scale group g in K order, the codes as
// [S/4][16 rows][4 consecutive k] bytes (VNNI quads = AMX B-tile rows), then
// all groups' `d[16]`, then all groups' `c[16]`. 4-bit groups (S = 32) keep
// the same order over 4 quad-rows, element k in the low nibble and k + 16 in
// the high nibble of the same byte. 6-bit groups (S = 16, 4 quad-rows q of
// 64 bytes) are 3 vectors of 64 bytes: V0 = q0 | (q2 >> 4) << 6,
// V1 = q1 | (q3 >> 4) << 6, V2 = (q2 & 15) | (q3 & 15) << 4, so quad-rows
// 0 and 1 unpack with one AND and 2 and 3 with a few shifts and masks; their
// offset is always c = -32 d, so no `c` is stored.
// kU4K (Q4_K) keeps the file's scale structure so it stays 4.75 bits a
// weight: after the codes, per group 16 6-bit scales `sc` and 16 mins `m`
// (one byte each), then per super-block of 8 groups 16 float `d` and 16
// float `dmin`; the kernels form d * sc and c = -dmin * m per group (exact in
// float, as dequantization does).
//
// Size (bits a weight, packed vs file): Q4_K 4.75 vs 4.5; Q6_K 8 vs 6.56;
// Q4_0/Q4_1 6 vs 4.5/5; Q8_0 10 vs 8.5; Q5_0/Q5_1/Q5_K 10 vs 5.5/6/5.5
// (5-bit codes kept as bytes; TODO(#3): pack them like Q6_K); the float d and
// c of the legacy formats cost 2 bits a weight at S = 32.
// F32/F16/BF16 are quantized at load to the Q8_0 scheme (per 32 elements,
// scale max|w|/127, error <= max|w_block|/254 per weight).
#ifndef DLLM_KERNELS_QUANTIZED_MATRIX_H_
#define DLLM_KERNELS_QUANTIZED_MATRIX_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/ggml_types.h"

namespace dllm {

constexpr int kPanelRows = 16;  // output columns (weight rows) per panel

// The three code layouts every format reduces to; kernels are keyed by it.
enum class PackKind : int {
  kU4G32 = 0,  // 4-bit codes, scale group 32 (Q4_0, Q4_1, Q4_K)
  kU8G32 = 1,  // 8-bit codes, scale group 32 (Q8_0, Q5_*, F32/F16/BF16)
  kU6G16 = 2,  // 6-bit codes, scale group 16, c = -32 d (Q6_K)
  kU4K = 3,    // 4-bit codes as kU4G32, K-quant scales (Q4_K): see below
};
constexpr int kNumPackKinds = 4;

// Whether `type` can be packed, and with which kind.
bool PackSupported(GgmlType type);
PackKind PackKindOf(GgmlType type);
// Elements per scale group (32 or 16), code bits (4, 6 or 8), and whether
// groups store an offset `c` (else c = -32 d).
constexpr bool PackHasOffsets(PackKind kind) { return kind != PackKind::kU6G16; }
constexpr bool PackIsFourBit(PackKind kind) {
  return kind == PackKind::kU4G32 || kind == PackKind::kU4K;
}
constexpr int PackGroupSize(PackKind kind) { return kind == PackKind::kU6G16 ? 16 : 32; }
constexpr int PackCodeBits(PackKind kind) {
  return PackIsFourBit(kind) ? 4 : kind == PackKind::kU6G16 ? 6 : 8;
}
// K must be a multiple of this (the format's block, at least 32).
int64_t PackKMultiple(GgmlType type);
// `shift` where every group's offset is c = -2^shift d, exactly (Q4_0 3,
// Q5_0 4, Q6_K 5, Q8_0 and the float types 7), so a kernel may fold the
// offset into the integer dot as dot(u, q) - 2^shift sum(q); -1 where groups
// carry free mins (Q4_1, Q5_1, Q4_K, Q5_K). The decoders form c from it.
int PackOffsetShift(GgmlType type);

// Non-owning, copyable view of packed weights: W, rows x cols = N x K.
// Never outlives the storage it points into.
struct QuantizedMatrix {
  GgmlType type = GgmlType::kF32;  // the source format
  PackKind kind = PackKind::kU8G32;
  int offset_shift = -1;          // PackOffsetShift(type)
  int64_t rows = 0;               // N
  int64_t cols = 0;               // K
  size_t panel_bytes = 0;         // bytes of one 16-row panel
  const uint8_t* data = nullptr;  // 64-byte aligned; panels back to back

  int64_t num_panels() const { return (rows + kPanelRows - 1) / kPanelRows; }
  int64_t num_groups() const { return cols / PackGroupSize(kind); }
  const uint8_t* panel(int64_t p) const { return data + static_cast<size_t>(p) * panel_bytes; }
  // Codes of group g in panel p, and its scales and offsets (16 floats each;
  // offsets() is null for kU6G16; both are null for kU4K, which has
  // k_scales() / k_mins() (uint8, 16 a group) and super_scales() /
  // super_mins() (float, 16 a super-block of 8 groups) instead).
  size_t group_code_bytes() const {
    return PackGroupSize(kind) * kPanelRows * PackCodeBits(kind) / 8;
  }
  const uint8_t* codes(int64_t p, int64_t g) const { return panel(p) + g * group_code_bytes(); }
  const float* scales(int64_t p) const {
    return kind == PackKind::kU4K
               ? nullptr
               : reinterpret_cast<const float*>(panel(p) + num_groups() * group_code_bytes());
  }
  const float* offsets(int64_t p) const {
    return kind == PackKind::kU4K || !PackHasOffsets(kind) ? nullptr
                                                           : scales(p) + num_groups() * kPanelRows;
  }
  const uint8_t* k_scales(int64_t p) const { return panel(p) + num_groups() * group_code_bytes(); }
  const uint8_t* k_mins(int64_t p) const { return k_scales(p) + num_groups() * kPanelRows; }
  const float* super_scales(int64_t p) const {
    return reinterpret_cast<const float*>(k_mins(p) + num_groups() * kPanelRows);
  }
  const float* super_mins(int64_t p) const {
    return super_scales(p) + num_groups() / 8 * kPanelRows;
  }
};

// Bytes `PackMatrix` writes for an N x K matrix of `type`.
size_t PackedBytes(GgmlType type, int64_t rows, int64_t cols);

// Repacks `rows` rows of `cols` elements of `type` (rows back to back, as
// in a GGUF tensor) into `dst` (64-byte aligned, `PackedBytes` long) and
// returns the view. Contract: PackSupported(type), cols % PackKMultiple == 0.
QuantizedMatrix PackMatrix(GgmlType type, const void* src, int64_t rows, int64_t cols, void* dst);

// PackMatrix in pieces, for a parallel loader (about 3-4 ns a weight on one
// core): PackedView returns the view without writing; PackPanels fills panels
// [panel_begin, panel_end) of it from `src`. Disjoint ranges may run
// concurrently; PackMatrix == PackedView + PackPanels(0, num_panels()).
QuantizedMatrix PackedView(GgmlType type, int64_t rows, int64_t cols, void* dst);
void PackPanels(const QuantizedMatrix& view, const void* src, int64_t panel_begin,
                int64_t panel_end);

// Owning, 64-byte aligned storage for a packed matrix. Move-only.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // Allocates and packs; see PackMatrix for the contract.
  PackedMatrix(GgmlType type, const void* src, int64_t rows, int64_t cols);
  const QuantizedMatrix& view() const { return view_; }
  size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> storage_;
  size_t bytes_ = 0;
  QuantizedMatrix view_;
};

// Tells the kernel the whole pages inside [data, data + bytes) of a
// read-only file mapping are no longer needed (madvise MADV_DONTNEED), so
// only the packed copy stays resident. Pages are read back from the file if
// touched again. Returns the number of bytes released.
size_t ReleaseMappedRange(const void* data, size_t bytes);

}  // namespace dllm

#endif  // DLLM_KERNELS_QUANTIZED_MATRIX_H_
