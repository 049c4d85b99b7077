// The ggml tensor type table: every type id the GGUF specification defines,
// with its block size and bytes per block, and whether dllm's kernels can run
// it. Each type fact lives in this one table, indexed by the type id.
#ifndef DLLM_KERNELS_GGML_TYPES_H_
#define DLLM_KERNELS_GGML_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dllm {

// Type ids as stored in a GGUF tensor info (ggml's `enum ggml_type`).
// Ids 4, 5, 31-33 and 36-38 were removed from ggml and are not valid.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeTraits {
  const char* name = "";   // ggml's name, e.g. "Q4_K"
  int64_t block_size = 0;  // elements per block (1 for plain types)
  size_t type_size = 0;    // bytes per block
  bool supported = false;  // dllm can dequantize and multiply it
};

// Returns the traits of type id `id`, or nullopt for ids the spec does not
// define (including removed ones).
std::optional<GgmlTypeTraits> GgmlTypeTraitsOf(uint32_t id);

// Traits of a valid type; the enum guarantees the id is known.
const GgmlTypeTraits& TraitsOf(GgmlType type);

inline const char* GgmlTypeName(GgmlType type) { return TraitsOf(type).name; }

// Bytes of a row of `n` elements; `n` must be a multiple of the block size.
inline size_t RowBytes(GgmlType type, int64_t n) {
  const GgmlTypeTraits& t = TraitsOf(type);
  return static_cast<size_t>(n / t.block_size) * t.type_size;
}

// Parses a ggml type name ("Q4_K", case-insensitive).
std::optional<GgmlType> ParseGgmlType(std::string_view name);

}  // namespace dllm

#endif  // DLLM_KERNELS_GGML_TYPES_H_
