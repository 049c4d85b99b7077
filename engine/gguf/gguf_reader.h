// GGUF v2/v3 reader. The file is memory-mapped read-only; metadata strings
// and tensor data are views into the mapping, so a `GgufFile` must outlive
// every view taken from it. Every count, length and offset is checked against
// the bytes left before it is used: a hostile file yields an
// INVALID_ARGUMENT status naming the file, the byte offset and the reason.
#ifndef DLLM_ENGINE_GGUF_GGUF_READER_H_
#define DLLM_ENGINE_GGUF_GGUF_READER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/mapped_file.h"
#include "kernels/ggml_types.h"

namespace dllm {

// Metadata value types (the GGUF spec's `gguf_metadata_value_type`).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

absl::string_view GgufValueTypeName(GgufValueType type);  // "uint32", "array", ...
// Bytes of one value of a fixed-size type; 0 for string and array.
uint64_t GgufValueTypeBytes(GgufValueType type);

// Limits on what a file may declare; anything larger is rejected as hostile.
struct GgufLimits {
  uint64_t max_string_bytes = 16u << 20;  // one key or string value
  uint64_t max_array_elements = 1u << 26;
  int max_array_depth = 8;  // arrays of arrays of ...
  uint64_t max_tensors = 1u << 20;
  uint64_t max_kv = 1u << 20;
  int max_dims = 4;
};

// One metadata value. Scalars are widened into `u`, `i`, `f` or `b` by type;
// strings and scalar arrays are views into the mapping.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;         // unsigned integer types
  int64_t i = 0;          // signed integer types
  double f = 0;           // float32 / float64
  bool b = false;         // bool
  absl::string_view str;  // string

  // Arrays: element type and count. Scalar elements stay in the file
  // (`raw`, little-endian, packed); strings and nested arrays are parsed.
  GgufValueType elem_type = GgufValueType::kUint8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;
  std::vector<absl::string_view> strings;
  std::vector<GgufValue> arrays;

  bool is_integer() const;
  bool is_float() const;
  // Human-readable type, e.g. "uint32" or "array[string]".
  std::string TypeString() const;
};

struct GgufTensor {
  absl::string_view name;
  GgmlType type = GgmlType::kF32;
  int n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ne[0] = row length (fastest)
  uint64_t offset = 0;                       // relative to the start of the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // non-owning; into the mapping

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  std::string ShapeString() const;  // "[256, 8256]"
};

// A parsed GGUF file. Immutable after construction; safe to share.
class GgufFile {
 public:
  // Maps and parses `path`.
  static absl::StatusOr<GgufFile> Open(const std::string& path, const GgufLimits& limits = {});
  // Parses a buffer the caller keeps alive (fuzzing, tests).
  static absl::StatusOr<GgufFile> Parse(const uint8_t* data, size_t size, std::string name,
                                        const GgufLimits& limits = {});

  GgufFile(GgufFile&&) = default;
  GgufFile& operator=(GgufFile&&) = default;

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute
  size_t file_size() const { return size_; }
  const uint8_t* file_data() const { return data_; }

  const std::vector<std::pair<absl::string_view, GgufValue>>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  // After loading: MappedFile::DetachFromFile over this file's mapping, so
  // every view stays valid and no later change to the file reaches them
  // (`dropped`, absolute file ranges, read as zeros). Nothing for a Parse()d
  // buffer.
  absl::Status DetachFromFile(std::vector<MappedFile::Range> dropped);

  const GgufValue* FindValue(absl::string_view key) const;
  const GgufTensor* FindTensor(absl::string_view name) const;
  bool HasKey(absl::string_view key) const { return FindValue(key) != nullptr; }

  // Typed accessors. NOT_FOUND when the key is missing; INVALID_ARGUMENT,
  // naming the key and the type found, when the value does not fit.
  absl::StatusOr<uint64_t> GetUint(absl::string_view key) const;  // any non-negative integer
  absl::StatusOr<int64_t> GetInt(absl::string_view key) const;    // any integer in int64 range
  absl::StatusOr<double> GetFloat(absl::string_view key) const;   // float32/64 or integer
  absl::StatusOr<bool> GetBool(absl::string_view key) const;
  absl::StatusOr<absl::string_view> GetString(absl::string_view key) const;
  absl::StatusOr<std::vector<absl::string_view>> GetStringArray(absl::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(absl::string_view key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(absl::string_view key) const;

  // Same, with `fallback` when the key is absent (a wrong type is still an error).
  absl::StatusOr<uint64_t> GetUintOr(absl::string_view key, uint64_t fallback) const;
  absl::StatusOr<double> GetFloatOr(absl::string_view key, double fallback) const;
  absl::StatusOr<bool> GetBoolOr(absl::string_view key, bool fallback) const;
  absl::StatusOr<absl::string_view> GetStringOr(absl::string_view key,
                                                absl::string_view fallback) const;

 private:
  GgufFile() = default;
  friend class GgufParser;

  std::optional<MappedFile> mapping_;
  std::string name_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<absl::string_view, GgufValue>> kv_;
  absl::flat_hash_map<absl::string_view, size_t> kv_index_;
  std::vector<GgufTensor> tensors_;
  absl::flat_hash_map<absl::string_view, size_t> tensor_index_;
};

// Scalar element `index` of a scalar array, widened like the typed getters.
// The caller guarantees `index < value.count` and a scalar element type.
int64_t GgufArrayInt(const GgufValue& value, uint64_t index);
double GgufArrayFloat(const GgufValue& value, uint64_t index);

// Renders a value for display; long arrays are summarised.
std::string GgufValueToString(const GgufValue& value, size_t max_items = 8);

}  // namespace dllm

#endif  // DLLM_ENGINE_GGUF_GGUF_READER_H_
