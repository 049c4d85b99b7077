#include "engine/gguf/gguf_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/base/status_macros.h"

namespace dllm {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read little-endian
constexpr uint32_t kDefaultAlignment = 32;
// Smallest encodings, used to bound counts by the bytes left.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                  // empty key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim

}  // namespace

uint64_t GgufValueTypeBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

namespace {

bool ValidValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Reads a scalar of `type` at `p` into the widened fields of `out`.
void DecodeScalar(GgufValueType type, const uint8_t* p, GgufValue* out) {
  switch (type) {
    case GgufValueType::kUint8:
      out->u = Load<uint8_t>(p);
      break;
    case GgufValueType::kUint16:
      out->u = Load<uint16_t>(p);
      break;
    case GgufValueType::kUint32:
      out->u = Load<uint32_t>(p);
      break;
    case GgufValueType::kUint64:
      out->u = Load<uint64_t>(p);
      break;
    case GgufValueType::kInt8:
      out->i = Load<int8_t>(p);
      break;
    case GgufValueType::kInt16:
      out->i = Load<int16_t>(p);
      break;
    case GgufValueType::kInt32:
      out->i = Load<int32_t>(p);
      break;
    case GgufValueType::kInt64:
      out->i = Load<int64_t>(p);
      break;
    case GgufValueType::kFloat32:
      out->f = Load<float>(p);
      break;
    case GgufValueType::kFloat64:
      out->f = Load<double>(p);
      break;
    case GgufValueType::kBool:
      out->b = Load<uint8_t>(p) != 0;
      break;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      break;
  }
}

bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 || t == GgufValueType::kUint32 ||
         t == GgufValueType::kUint64;
}
bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}
bool IsFloat(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

}  // namespace

// Walks the buffer once, front to back, checking each read against the end.
class GgufParser {
 public:
  GgufParser(const uint8_t* data, size_t size, const std::string& name, const GgufLimits& limits)
      : data_(data), size_(size), name_(name), limits_(limits) {}

  absl::Status Run(GgufFile* file) {
    DLLM_RETURN_IF_ERROR(ParseHeader(file));
    DLLM_RETURN_IF_ERROR(ParseMetadata(file));
    DLLM_RETURN_IF_ERROR(ParseTensorInfos(file));
    return PlaceTensors(file);
  }

 private:
  absl::Status Fail(uint64_t at, absl::string_view reason) const {
    return absl::InvalidArgumentError(absl::StrCat("gguf: ", name_, ": offset ", at, ": ", reason));
  }
  uint64_t Left() const { return size_ - pos_; }

  absl::Status Need(uint64_t bytes, absl::string_view what) const {
    if (bytes > Left()) {
      return Fail(pos_, absl::StrCat("truncated: ", what, " needs ", bytes, " bytes but only ",
                                     Left(), " remain"));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Read(T* out, absl::string_view what) {
    DLLM_RETURN_IF_ERROR(Need(sizeof(T), what));
    *out = Load<T>(data_ + pos_);
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(absl::string_view* out, uint64_t max_bytes, absl::string_view what) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    DLLM_RETURN_IF_ERROR(Read(&len, absl::StrCat(what, " length")));
    if (len > max_bytes) {
      return Fail(
          at, absl::StrCat(what, " length ", len, " exceeds the limit of ", max_bytes, " bytes"));
    }
    DLLM_RETURN_IF_ERROR(Need(len, what));
    *out = absl::string_view(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

  absl::Status ReadValueType(GgufValueType* out, absl::string_view what) {
    const uint64_t at = pos_;
    uint32_t t = 0;
    DLLM_RETURN_IF_ERROR(Read(&t, what));
    if (!ValidValueType(t)) {
      return Fail(at, absl::StrCat("unknown ", what, " ", t, " (valid: 0..12)"));
    }
    *out = static_cast<GgufValueType>(t);
    return absl::OkStatus();
  }

  absl::Status ParseHeader(GgufFile* file) {
    uint32_t magic = 0;
    DLLM_RETURN_IF_ERROR(Read(&magic, "magic"));
    if (magic != kGgufMagic) return Fail(0, "not a GGUF file (bad magic)");
    uint32_t version = 0;
    DLLM_RETURN_IF_ERROR(Read(&version, "version"));
    if (version == 1) {
      return absl::UnimplementedError(
          absl::StrCat("gguf: ", name_, ": offset 4: GGUF version 1 is obsolete; supported: 2, 3"));
    }
    if ((version & 0xffff) == 0 && version != 0) {
      return absl::UnimplementedError(
          absl::StrCat("gguf: ", name_, ": offset 4: big-endian GGUF files are not supported"));
    }
    if (version != 2 && version != 3) {
      return Fail(4, absl::StrCat("unsupported GGUF version ", version, "; supported: 2, 3"));
    }
    file->version_ = version;
    DLLM_RETURN_IF_ERROR(Read(&n_tensors_, "tensor count"));
    DLLM_RETURN_IF_ERROR(Read(&n_kv_, "metadata count"));
    if (n_tensors_ > limits_.max_tensors || n_tensors_ > Left() / kMinTensorInfoBytes) {
      return Fail(8, absl::StrCat("tensor count ", n_tensors_, " is impossible for a file of ",
                                  size_, " bytes"));
    }
    if (n_kv_ > limits_.max_kv || n_kv_ > Left() / kMinKvBytes) {
      return Fail(16, absl::StrCat("metadata count ", n_kv_, " is impossible for a file of ", size_,
                                   " bytes"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseValue(GgufValueType type, int depth, GgufValue* out) {
    out->type = type;
    if (type == GgufValueType::kString) {
      return ReadString(&out->str, limits_.max_string_bytes, "string value");
    }
    if (type != GgufValueType::kArray) {
      const uint64_t n = GgufValueTypeBytes(type);
      DLLM_RETURN_IF_ERROR(Need(n, GgufValueTypeName(type)));
      DecodeScalar(type, data_ + pos_, out);
      pos_ += n;
      return absl::OkStatus();
    }
    const uint64_t at = pos_;
    if (depth >= limits_.max_array_depth) {
      return Fail(at, absl::StrCat("arrays nested deeper than ", limits_.max_array_depth));
    }
    DLLM_RETURN_IF_ERROR(ReadValueType(&out->elem_type, "array element type"));
    DLLM_RETURN_IF_ERROR(Read(&out->count, "array length"));
    const uint64_t elem = GgufValueTypeBytes(out->elem_type);
    // Strings need at least their 8-byte length, arrays type + length.
    const uint64_t min_elem =
        elem != 0 ? elem : (out->elem_type == GgufValueType::kString ? 8 : 12);
    if (out->count > limits_.max_array_elements || out->count > Left() / min_elem) {
      return Fail(
          at, absl::StrCat("array length ", out->count, " of ", GgufValueTypeName(out->elem_type),
                           " exceeds the ", Left(), " bytes left in the file"));
    }
    if (elem != 0) {
      out->raw = data_ + pos_;
      pos_ += out->count * elem;
      return absl::OkStatus();
    }
    if (out->elem_type == GgufValueType::kString) {
      out->strings.resize(out->count);
      for (uint64_t k = 0; k < out->count; ++k) {
        DLLM_RETURN_IF_ERROR(
            ReadString(&out->strings[k], limits_.max_string_bytes, "array string"));
      }
      return absl::OkStatus();
    }
    out->arrays.resize(out->count);
    for (uint64_t k = 0; k < out->count; ++k) {
      DLLM_RETURN_IF_ERROR(ParseValue(GgufValueType::kArray, depth + 1, &out->arrays[k]));
    }
    return absl::OkStatus();
  }

  absl::Status ParseMetadata(GgufFile* file) {
    file->kv_.reserve(n_kv_);
    for (uint64_t k = 0; k < n_kv_; ++k) {
      const uint64_t at = pos_;
      absl::string_view key;
      DLLM_RETURN_IF_ERROR(ReadString(&key, 65535, "metadata key"));
      GgufValueType type = GgufValueType::kUint8;
      DLLM_RETURN_IF_ERROR(ReadValueType(&type, absl::StrCat("value type of key '", key, "'")));
      GgufValue value;
      absl::Status s = ParseValue(type, 0, &value);
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat(s.message(), " (in key '", key, "')"));
      }
      if (!file->kv_index_.emplace(key, file->kv_.size()).second) {
        return Fail(at, absl::StrCat("duplicate metadata key '", key, "'"));
      }
      file->kv_.emplace_back(key, std::move(value));
    }
    if (const GgufValue* a = file->FindValue("general.alignment")) {
      if (a->type != GgufValueType::kUint32) {
        return Fail(pos_, absl::StrCat("general.alignment has type ", a->TypeString(),
                                       ", expected uint32"));
      }
      if (a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > (1u << 20)) {
        return Fail(
            pos_, absl::StrCat("general.alignment ", a->u, " is not a power of two in [1, 2^20]"));
      }
      file->alignment_ = static_cast<uint32_t>(a->u);
    } else {
      file->alignment_ = kDefaultAlignment;
    }
    return absl::OkStatus();
  }

  absl::Status ParseTensorInfos(GgufFile* file) {
    file->tensors_.reserve(n_tensors_);
    for (uint64_t k = 0; k < n_tensors_; ++k) {
      const uint64_t at = pos_;
      GgufTensor t;
      DLLM_RETURN_IF_ERROR(ReadString(&t.name, 65535, "tensor name"));
      const std::string who = absl::StrCat("tensor '", t.name, "'");
      uint32_t n_dims = 0;
      DLLM_RETURN_IF_ERROR(Read(&n_dims, absl::StrCat(who, " n_dims")));
      if (n_dims < 1 || n_dims > static_cast<uint32_t>(limits_.max_dims)) {
        return Fail(at,
                    absl::StrCat(who, ": n_dims ", n_dims, " not in [1, ", limits_.max_dims, "]"));
      }
      t.n_dims = static_cast<int>(n_dims);
      uint64_t n_elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t ne = 0;
        DLLM_RETURN_IF_ERROR(Read(&ne, absl::StrCat(who, " dimension")));
        if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return Fail(at, absl::StrCat(who, ": dimension ", d, " is ", ne));
        }
        if (n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne) {
          return Fail(at, absl::StrCat(who, ": element count overflows"));
        }
        n_elements *= ne;
        t.ne[d] = static_cast<int64_t>(ne);
      }
      uint32_t type_id = 0;
      const uint64_t type_at = pos_;
      DLLM_RETURN_IF_ERROR(Read(&type_id, absl::StrCat(who, " type")));
      const std::optional<GgmlTypeTraits> traits = GgmlTypeTraitsOf(type_id);
      if (!traits) {
        return Fail(type_at, absl::StrCat(who, ": unknown tensor type id ", type_id));
      }
      t.type = static_cast<GgmlType>(type_id);
      if (t.ne[0] % traits->block_size != 0) {
        return Fail(at, absl::StrCat(who, ": row length ", t.ne[0], " is not a multiple of ",
                                     traits->name, "'s block size ", traits->block_size));
      }
      // n_elements < 2^63 and type_size <= 292, block_size >= 1: no overflow
      // in 128-bit; do it in two steps that cannot overflow 64 bits.
      const uint64_t blocks = n_elements / static_cast<uint64_t>(traits->block_size);
      if (blocks > std::numeric_limits<uint64_t>::max() / traits->type_size) {
        return Fail(at, absl::StrCat(who, ": byte size overflows"));
      }
      t.n_bytes = blocks * traits->type_size;
      DLLM_RETURN_IF_ERROR(Read(&t.offset, absl::StrCat(who, " data offset")));
      if (t.offset % file->alignment_ != 0) {
        return Fail(at, absl::StrCat(who, ": data offset ", t.offset,
                                     " is not a multiple of the alignment ", file->alignment_));
      }
      if (!file->tensor_index_.emplace(t.name, file->tensors_.size()).second) {
        return Fail(at, absl::StrCat("duplicate tensor name '", t.name, "'"));
      }
      file->tensors_.push_back(t);
    }
    return absl::OkStatus();
  }

  absl::Status PlaceTensors(GgufFile* file) {
    const uint64_t align = file->alignment_;
    const uint64_t data_offset = (pos_ + align - 1) / align * align;
    file->data_offset_ = data_offset;
    if (file->tensors_.empty()) return absl::OkStatus();
    if (data_offset > size_) {
      return Fail(pos_, absl::StrCat("data section at ", data_offset,
                                     " starts past the end of the file (", size_, " bytes)"));
    }
    const uint64_t data_bytes = size_ - data_offset;
    std::vector<const GgufTensor*> by_offset;
    by_offset.reserve(file->tensors_.size());
    for (GgufTensor& t : file->tensors_) {
      if (t.offset > data_bytes || t.n_bytes > data_bytes - t.offset) {
        return Fail(data_offset + std::min(t.offset, data_bytes),
                    absl::StrCat("tensor '", t.name, "': data at offset ", t.offset, " + ",
                                 t.n_bytes, " bytes exceeds the data section of ", data_bytes,
                                 " bytes (file size ", size_, ")"));
      }
      t.data = data_ + data_offset + t.offset;
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (size_t k = 1; k < by_offset.size(); ++k) {
      const GgufTensor& prev = *by_offset[k - 1];
      const GgufTensor& cur = *by_offset[k];
      if (prev.offset + prev.n_bytes > cur.offset) {
        return Fail(
            data_offset + cur.offset,
            absl::StrCat("tensor '", cur.name, "' (offset ", cur.offset, ") overlaps tensor '",
                         prev.name, "' (offset ", prev.offset, ", ", prev.n_bytes, " bytes)"));
      }
    }
    return absl::OkStatus();
  }

  const uint8_t* data_;
  size_t size_;
  const std::string& name_;
  const GgufLimits& limits_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

absl::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const { return IsUnsigned(type) || IsSigned(type); }
bool GgufValue::is_float() const { return IsFloat(type); }

std::string GgufValue::TypeString() const {
  if (type != GgufValueType::kArray) return std::string(GgufValueTypeName(type));
  return absl::StrCat("array[", GgufValueTypeName(elem_type), "]");
}

std::string GgufTensor::ShapeString() const {
  std::vector<int64_t> dims(ne.begin(), ne.begin() + n_dims);
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

absl::StatusOr<GgufFile> GgufFile::Parse(const uint8_t* data, size_t size, std::string name,
                                         const GgufLimits& limits) {
  GgufFile file;
  file.name_ = std::move(name);
  file.data_ = data;
  file.size_ = size;
  GgufParser parser(data, size, file.name_, limits);
  DLLM_RETURN_IF_ERROR(parser.Run(&file));
  return file;
}

absl::StatusOr<GgufFile> GgufFile::Open(const std::string& path, const GgufLimits& limits) {
  DLLM_ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::Open(path));
  DLLM_ASSIGN_OR_RETURN(GgufFile file, Parse(mapping.data(), mapping.size(), path, limits));
  file.mapping_.emplace(std::move(mapping));
  return file;
}

absl::Status GgufFile::DetachFromFile(std::vector<MappedFile::Range> dropped) {
  if (!mapping_) return absl::OkStatus();
  return mapping_->DetachFromFile(std::move(dropped));
}

const GgufValue* GgufFile::FindValue(absl::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensor* GgufFile::FindTensor(absl::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

absl::Status Missing(const std::string& file, absl::string_view key) {
  return absl::NotFoundError(absl::StrCat("gguf: ", file, ": missing key '", key, "'"));
}

absl::Status WrongType(const std::string& file, absl::string_view key, const GgufValue& v,
                       absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("gguf: ", file, ": key '", key, "' has type ",
                                                 v.TypeString(), ", expected ", expected));
}

absl::Status OutOfRange(const std::string& file, absl::string_view key, absl::string_view value,
                        absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("gguf: ", file, ": key '", key, "' value ", value,
                                                 " is out of range for ", expected));
}

}  // namespace

absl::StatusOr<uint64_t> GgufFile::GetUint(absl::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return Missing(name_, key);
  if (IsUnsigned(v->type)) return v->u;
  if (IsSigned(v->type)) {
    if (v->i < 0) return OutOfRange(name_, key, absl::StrCat(v->i), "a non-negative integer");
    return static_cast<uint64_t>(v->i);
  }
  return WrongType(name_, key, *v, "an unsigned integer");
}

absl::StatusOr<int64_t> GgufFile::GetInt(absl::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return Missing(name_, key);
  if (IsSigned(v->type)) return v->i;
  if (IsUnsigned(v->type)) {
    if (v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return OutOfRange(name_, key, absl::StrCat(v->u), "int64");
    }
    return static_cast<int64_t>(v->u);
  }
  return WrongType(name_, key, *v, "an integer");
}

absl::StatusOr<double> GgufFile::GetFloat(absl::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return Missing(name_, key);
  if (IsFloat(v->type)) return v->f;
  if (IsUnsigned(v->type)) return static_cast<double>(v->u);
  if (IsSigned(v->type)) return static_cast<double>(v->i);
  return WrongType(name_, key, *v, "a number");
}

absl::StatusOr<bool> GgufFile::GetBool(absl::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != GgufValueType::kBool) return WrongType(name_, key, *v, "bool");
  return v->b;
}

absl::StatusOr<absl::string_view> GgufFile::GetString(absl::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != GgufValueType::kString) return WrongType(name_, key, *v, "string");
  return v->str;
}

absl::StatusOr<std::vector<absl::string_view>> GgufFile::GetStringArray(
    absl::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != GgufValueType::kArray || v->elem_type != GgufValueType::kString) {
    return WrongType(name_, key, *v, "array[string]");
  }
  return v->strings;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(absl::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != GgufValueType::kArray || !(IsSigned(v->elem_type) || IsUnsigned(v->elem_type))) {
    return WrongType(name_, key, *v, "an array of integers");
  }
  std::vector<int64_t> out(v->count);
  for (uint64_t k = 0; k < v->count; ++k) {
    if (v->elem_type == GgufValueType::kUint64 &&
        Load<uint64_t>(v->raw + 8 * k) >
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return OutOfRange(name_, key, absl::StrCat("[", k, "]"), "int64");
    }
    out[k] = GgufArrayInt(*v, k);
  }
  return out;
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(absl::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return Missing(name_, key);
  if (v->type != GgufValueType::kArray || GgufValueTypeBytes(v->elem_type) == 0 ||
      v->elem_type == GgufValueType::kBool) {
    return WrongType(name_, key, *v, "an array of numbers");
  }
  std::vector<double> out(v->count);
  for (uint64_t k = 0; k < v->count; ++k) out[k] = GgufArrayFloat(*v, k);
  return out;
}

absl::StatusOr<uint64_t> GgufFile::GetUintOr(absl::string_view key, uint64_t fallback) const {
  return HasKey(key) ? GetUint(key) : absl::StatusOr<uint64_t>(fallback);
}
absl::StatusOr<double> GgufFile::GetFloatOr(absl::string_view key, double fallback) const {
  return HasKey(key) ? GetFloat(key) : absl::StatusOr<double>(fallback);
}
absl::StatusOr<bool> GgufFile::GetBoolOr(absl::string_view key, bool fallback) const {
  return HasKey(key) ? GetBool(key) : absl::StatusOr<bool>(fallback);
}
absl::StatusOr<absl::string_view> GgufFile::GetStringOr(absl::string_view key,
                                                        absl::string_view fallback) const {
  return HasKey(key) ? GetString(key) : absl::StatusOr<absl::string_view>(fallback);
}

int64_t GgufArrayInt(const GgufValue& v, uint64_t k) {
  GgufValue e;
  DecodeScalar(v.elem_type, v.raw + k * GgufValueTypeBytes(v.elem_type), &e);
  if (IsUnsigned(v.elem_type)) return static_cast<int64_t>(e.u);
  if (IsFloat(v.elem_type)) return static_cast<int64_t>(e.f);
  if (v.elem_type == GgufValueType::kBool) return e.b;
  return e.i;
}

double GgufArrayFloat(const GgufValue& v, uint64_t k) {
  GgufValue e;
  DecodeScalar(v.elem_type, v.raw + k * GgufValueTypeBytes(v.elem_type), &e);
  if (IsUnsigned(v.elem_type)) return static_cast<double>(e.u);
  if (IsSigned(v.elem_type)) return static_cast<double>(e.i);
  if (v.elem_type == GgufValueType::kBool) return e.b;
  return e.f;
}

std::string GgufValueToString(const GgufValue& v, size_t max_items) {
  if (IsUnsigned(v.type)) return absl::StrCat(v.u);
  if (IsSigned(v.type)) return absl::StrCat(v.i);
  if (IsFloat(v.type)) return absl::StrCat(v.f);
  if (v.type == GgufValueType::kBool) return v.b ? "true" : "false";
  if (v.type == GgufValueType::kString) {
    std::string s(v.str.substr(0, 80));
    for (char& c : s) {
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    }
    return absl::StrCat("\"", s, v.str.size() > 80 ? "...\"" : "\"");
  }
  std::vector<std::string> items;
  for (uint64_t k = 0; k < v.count && k < max_items; ++k) {
    if (v.elem_type == GgufValueType::kString) {
      GgufValue s;
      s.type = GgufValueType::kString;
      s.str = v.strings[k];
      items.push_back(GgufValueToString(s));
    } else if (v.elem_type == GgufValueType::kArray) {
      items.push_back(GgufValueToString(v.arrays[k], max_items));
    } else if (IsFloat(v.elem_type)) {
      items.push_back(absl::StrCat(GgufArrayFloat(v, k)));
    } else {
      items.push_back(absl::StrCat(GgufArrayInt(v, k)));
    }
  }
  if (v.count > max_items) items.push_back(absl::StrCat("... (", v.count, " items)"));
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

}  // namespace dllm
