// GgufWriter: encodes the GGUF v3 layout (little-endian; strings as u64
// length + bytes; each key/value as key, u32 type, value; each tensor info as
// name, u32 n_dims, u64 ne[], u32 type, u64 offset) through one FILE*.
#include "engine/synth/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kVersion = 3;

// The writer assumes a little-endian host, as the file format does.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GgufWriter needs a little-endian host");

template <typename T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void AppendString(std::string* out, absl::string_view s) {
  Append<uint64_t>(out, s.size());
  out->append(s.data(), s.size());
}

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

absl::StatusOr<GgufWriter> GgufWriter::Create(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    const int err = errno;
    return GgufWriter(path, nullptr).IoError("cannot create", err);
  }
  return GgufWriter(path, f);
}

GgufWriter::GgufWriter(GgufWriter&& other) noexcept { *this = std::move(other); }

GgufWriter& GgufWriter::operator=(GgufWriter&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) std::fclose(file_);
    path_ = std::move(other.path_);
    file_ = std::exchange(other.file_, nullptr);
    kv_bytes_ = std::move(other.kv_bytes_);
    keys_ = std::move(other.keys_);
    alignment_ = other.alignment_;
    alignment_set_ = other.alignment_set_;
    bad_alignment_ = other.bad_alignment_;
    tensors_ = std::move(other.tensors_);
    data_bytes_ = other.data_bytes_;
    data_offset_ = other.data_offset_;
    pos_ = other.pos_;
    header_written_ = other.header_written_;
    finished_ = other.finished_;
    current_ = other.current_;
    current_written_ = other.current_written_;
  }
  return *this;
}

GgufWriter::~GgufWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status GgufWriter::Error(absl::StatusCode code, absl::string_view what) const {
  return absl::Status(code, absl::StrCat("gguf writer: ", path_, ": ", what));
}

absl::Status GgufWriter::IoError(absl::string_view what, int err) const {
  absl::StatusCode code = absl::StatusCode::kInternal;
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      code = absl::StatusCode::kNotFound;
      break;
    case EACCES:
    case EPERM:
    case EROFS:
      code = absl::StatusCode::kPermissionDenied;
      break;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      code = absl::StatusCode::kResourceExhausted;
      break;
    default:
      break;
  }
  return Error(code, absl::StrCat(what, ": ", std::strerror(err)));
}

void GgufWriter::BeginKv(absl::string_view key, GgufValueType type) {
  keys_.emplace_back(key);
  AppendString(&kv_bytes_, key);
  Append<uint32_t>(&kv_bytes_, static_cast<uint32_t>(type));
}

void GgufWriter::AddUint8(absl::string_view key, uint8_t v) {
  BeginKv(key, GgufValueType::kUint8);
  Append(&kv_bytes_, v);
}
void GgufWriter::AddInt8(absl::string_view key, int8_t v) {
  BeginKv(key, GgufValueType::kInt8);
  Append(&kv_bytes_, v);
}
void GgufWriter::AddUint16(absl::string_view key, uint16_t v) {
  BeginKv(key, GgufValueType::kUint16);
  Append(&kv_bytes_, v);
}
void GgufWriter::AddInt16(absl::string_view key, int16_t v) {
  BeginKv(key, GgufValueType::kInt16);
  Append(&kv_bytes_, v);
}
void GgufWriter::AddUint32(absl::string_view key, uint32_t v) {
  BeginKv(key, GgufValueType::kUint32);
  Append(&kv_bytes_, v);
  if (key == "general.alignment") {
    alignment_set_ = true;
    bad_alignment_ = v == 0 || (v & (v - 1)) != 0;
    if (!bad_alignment_) alignment_ = v;
  }
}
void GgufWriter::AddInt32(absl::string_view key, int32_t v) {
  BeginKv(key, GgufValueType::kInt32);
  Append(&kv_bytes_, v);
}
void GgufWriter::AddFloat32(absl::string_view key, float v) {
  BeginKv(key, GgufValueType::kFloat32);
  Append(&kv_bytes_, v);
}
void GgufWriter::AddBool(absl::string_view key, bool v) {
  BeginKv(key, GgufValueType::kBool);
  Append<uint8_t>(&kv_bytes_, v ? 1 : 0);
}
void GgufWriter::AddString(absl::string_view key, absl::string_view v) {
  BeginKv(key, GgufValueType::kString);
  AppendString(&kv_bytes_, v);
}
void GgufWriter::AddUint64(absl::string_view key, uint64_t v) {
  BeginKv(key, GgufValueType::kUint64);
  Append(&kv_bytes_, v);
}
void GgufWriter::AddInt64(absl::string_view key, int64_t v) {
  BeginKv(key, GgufValueType::kInt64);
  Append(&kv_bytes_, v);
}
void GgufWriter::AddFloat64(absl::string_view key, double v) {
  BeginKv(key, GgufValueType::kFloat64);
  Append(&kv_bytes_, v);
}

void GgufWriter::AddStringArray(absl::string_view key, const std::vector<std::string>& v) {
  BeginKv(key, GgufValueType::kArray);
  Append<uint32_t>(&kv_bytes_, static_cast<uint32_t>(GgufValueType::kString));
  Append<uint64_t>(&kv_bytes_, v.size());
  for (const std::string& s : v) AppendString(&kv_bytes_, s);
}

void GgufWriter::AddScalarArray(absl::string_view key, GgufValueType elem_type, const void* data,
                                uint64_t count) {
  BeginKv(key, GgufValueType::kArray);
  Append<uint32_t>(&kv_bytes_, static_cast<uint32_t>(elem_type));
  Append<uint64_t>(&kv_bytes_, count);
  kv_bytes_.append(static_cast<const char*>(data), count * GgufValueTypeBytes(elem_type));
}

void GgufWriter::AddInt32Array(absl::string_view key, const std::vector<int32_t>& v) {
  AddScalarArray(key, GgufValueType::kInt32, v.data(), v.size());
}
void GgufWriter::AddUint32Array(absl::string_view key, const std::vector<uint32_t>& v) {
  AddScalarArray(key, GgufValueType::kUint32, v.data(), v.size());
}
void GgufWriter::AddFloat32Array(absl::string_view key, const std::vector<float>& v) {
  AddScalarArray(key, GgufValueType::kFloat32, v.data(), v.size());
}

absl::Status GgufWriter::AddTensor(absl::string_view name, GgmlType type,
                                   const std::vector<int64_t>& ne) {
  if (header_written_) {
    return Error(absl::StatusCode::kFailedPrecondition,
                 absl::StrCat("tensor '", name, "' declared after the header was written"));
  }
  if (ne.empty() || ne.size() > 4) {
    return Error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat("tensor '", name, "' has ", ne.size(), " dimensions (must be 1-4)"));
  }
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("tensor '", name, "' has dimension ", d));
    }
    n *= d;
  }
  const GgmlTypeTraits& traits = TraitsOf(type);
  if (traits.block_size == 0 || ne[0] % traits.block_size != 0) {
    return Error(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("tensor '", name, "': row length ", ne[0], " is not a multiple of the ",
                     traits.name, " block size ", traits.block_size));
  }
  for (const TensorDecl& t : tensors_) {
    if (t.name == name) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("tensor '", name, "' declared twice"));
    }
  }
  TensorDecl t;
  t.name = std::string(name);
  t.type = type;
  t.ne = ne;
  t.n_bytes = RowBytes(type, ne[0]) * static_cast<uint64_t>(n / ne[0]);
  tensors_.push_back(std::move(t));
  return absl::OkStatus();
}

absl::Status GgufWriter::Write(const void* data, size_t size) {
  if (size == 0) return absl::OkStatus();
  if (std::fwrite(data, 1, size, file_) != size) {
    return IoError(absl::StrCat("write of ", size, " bytes at offset ", pos_, " failed"), errno);
  }
  pos_ += size;
  return absl::OkStatus();
}

absl::Status GgufWriter::Pad() {
  static constexpr char kZeros[256] = {};
  uint64_t n = AlignUp(pos_, alignment_) - pos_;
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof(kZeros)));
    if (absl::Status s = Write(kZeros, chunk); !s.ok()) return s;
    n -= chunk;
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteHeader() {
  if (file_ == nullptr || header_written_) {
    return Error(absl::StatusCode::kFailedPrecondition,
                 file_ == nullptr ? "file is closed" : "header already written");
  }
  if (bad_alignment_) {
    return Error(absl::StatusCode::kInvalidArgument,
                 "general.alignment must be a non-zero power of two");
  }
  absl::flat_hash_set<absl::string_view> seen;
  for (const std::string& k : keys_) {
    if (!seen.insert(k).second) {
      return Error(absl::StatusCode::kInvalidArgument, absl::StrCat("key '", k, "' added twice"));
    }
  }
  uint64_t offset = 0;
  for (TensorDecl& t : tensors_) {
    t.offset = offset;
    offset = AlignUp(offset + t.n_bytes, alignment_);
  }
  data_bytes_ = offset;

  std::string head;
  Append<uint32_t>(&head, kMagic);
  Append<uint32_t>(&head, kVersion);
  Append<uint64_t>(&head, tensors_.size());
  Append<uint64_t>(&head, keys_.size());
  head += kv_bytes_;
  for (const TensorDecl& t : tensors_) {
    AppendString(&head, t.name);
    Append<uint32_t>(&head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Append<uint64_t>(&head, static_cast<uint64_t>(d));
    Append<uint32_t>(&head, static_cast<uint32_t>(t.type));
    Append<uint64_t>(&head, t.offset);
  }
  if (absl::Status s = Write(head.data(), head.size()); !s.ok()) return s;
  if (absl::Status s = Pad(); !s.ok()) return s;
  data_offset_ = pos_;
  header_written_ = true;
  kv_bytes_.clear();
  kv_bytes_.shrink_to_fit();
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteTensorData(const void* data, size_t size) {
  if (!header_written_ || finished_) {
    return Error(absl::StatusCode::kFailedPrecondition,
                 header_written_ ? "tensor data written after Finish()"
                                 : "tensor data written before WriteHeader()");
  }
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    if (current_ >= tensors_.size()) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat(size, " bytes of tensor data beyond the ", tensors_.size(),
                                " declared tensors"));
    }
    const TensorDecl& t = tensors_[current_];
    const uint64_t take = std::min<uint64_t>(size, t.n_bytes - current_written_);
    if (absl::Status s = Write(p, static_cast<size_t>(take)); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(s.message(), " (tensor '", t.name, "')"));
    }
    p += take;
    size -= static_cast<size_t>(take);
    current_written_ += take;
    if (current_written_ == t.n_bytes) {
      if (absl::Status s = Pad(); !s.ok()) return s;
      ++current_;
      current_written_ = 0;
    }
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::Finish() {
  if (!header_written_) {
    if (absl::Status s = WriteHeader(); !s.ok()) return s;
  }
  if (finished_) return Error(absl::StatusCode::kFailedPrecondition, "Finish() called twice");
  if (current_ < tensors_.size()) {
    const TensorDecl& t = tensors_[current_];
    return Error(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("tensor '", t.name, "' has ", current_written_, " of ", t.n_bytes,
                     " bytes written (", tensors_.size() - current_, " tensors incomplete)"));
  }
  finished_ = true;
  std::FILE* f = std::exchange(file_, nullptr);
  if (std::fflush(f) != 0) {
    const int err = errno;
    std::fclose(f);
    return IoError("flush failed", err);
  }
  if (std::fclose(f) != 0) return IoError("close failed", errno);
  return absl::OkStatus();
}

}  // namespace dllm
