// Streaming GGUF v3 writer. Metadata and tensor declarations are collected
// first (small); `WriteHeader` then writes the header, key/values and tensor
// infos, and tensor data follows one tensor (or one chunk) at a time in the
// declared order, so writing a large model needs memory for one tensor only.
// Offsets and padding follow `general.alignment` (32 unless that key is set).
//
// Usage:
//   DLLM_ASSIGN_OR_RETURN(GgufWriter w, GgufWriter::Create(path));
//   w.AddString("general.architecture", "llada");
//   DLLM_RETURN_IF_ERROR(w.AddTensor("token_embd.weight", GgmlType::kQ4_K, {256, 8256}));
//   DLLM_RETURN_IF_ERROR(w.WriteHeader());
//   DLLM_RETURN_IF_ERROR(w.WriteTensorData(bytes, size));  // per tensor, in order
//   DLLM_RETURN_IF_ERROR(w.Finish());
//
// Errors name the file and the reason: I/O failures carry errno's text
// (NOT_FOUND, PERMISSION_DENIED, RESOURCE_EXHAUSTED for a full disk,
// INTERNAL otherwise); bad declarations are INVALID_ARGUMENT; calls out of
// order are FAILED_PRECONDITION. One thread at a time.
#ifndef DLLM_ENGINE_SYNTH_GGUF_WRITER_H_
#define DLLM_ENGINE_SYNTH_GGUF_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_reader.h"
#include "kernels/ggml_types.h"

namespace dllm {

class GgufWriter {
 public:
  // Creates (or truncates) `path`.
  static absl::StatusOr<GgufWriter> Create(const std::string& path);

  GgufWriter(GgufWriter&& other) noexcept;
  GgufWriter& operator=(GgufWriter&& other) noexcept;
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;
  ~GgufWriter();  // closes the file; an unfinished file is left truncated

  // Metadata, before `WriteHeader`, in the order given (duplicate keys are
  // reported by `WriteHeader`). `general.alignment` set with `AddUint32`
  // becomes the data alignment; it must be a power of two.
  void AddUint8(absl::string_view key, uint8_t v);
  void AddInt8(absl::string_view key, int8_t v);
  void AddUint16(absl::string_view key, uint16_t v);
  void AddInt16(absl::string_view key, int16_t v);
  void AddUint32(absl::string_view key, uint32_t v);
  void AddInt32(absl::string_view key, int32_t v);
  void AddFloat32(absl::string_view key, float v);
  void AddBool(absl::string_view key, bool v);
  void AddString(absl::string_view key, absl::string_view v);
  void AddUint64(absl::string_view key, uint64_t v);
  void AddInt64(absl::string_view key, int64_t v);
  void AddFloat64(absl::string_view key, double v);
  void AddStringArray(absl::string_view key, const std::vector<std::string>& v);
  // An array of `count` scalars of `elem_type` (not string or array), given
  // as their packed little-endian bytes.
  void AddScalarArray(absl::string_view key, GgufValueType elem_type, const void* data,
                      uint64_t count);
  void AddInt32Array(absl::string_view key, const std::vector<int32_t>& v);
  void AddUint32Array(absl::string_view key, const std::vector<uint32_t>& v);
  void AddFloat32Array(absl::string_view key, const std::vector<float>& v);

  // Declares a tensor, before `WriteHeader`. `ne` has 1 to 4 positive
  // dimensions, `ne[0]` (the row) first and a multiple of the type's block size.
  absl::Status AddTensor(absl::string_view name, GgmlType type, const std::vector<int64_t>& ne);

  // Writes everything before the tensor data, padded to the alignment.
  absl::Status WriteHeader();

  // Appends `size` bytes of the current tensor's data (declaration order).
  // A tensor may arrive in several chunks; once its byte count is reached
  // the writer pads to the alignment and moves to the next tensor.
  absl::Status WriteTensorData(const void* data, size_t size);

  // Checks every tensor is complete, flushes and closes the file.
  absl::Status Finish();

  // Bytes of the data section the declared tensors need (with padding), and
  // the absolute offset where it starts (valid after `WriteHeader`).
  uint64_t data_section_bytes() const { return data_bytes_; }
  uint64_t data_offset() const { return data_offset_; }

 private:
  struct TensorDecl {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t offset = 0;  // within the data section
    uint64_t n_bytes = 0;
  };

  GgufWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

  void BeginKv(absl::string_view key, GgufValueType type);
  absl::Status Write(const void* data, size_t size);
  absl::Status Pad();
  absl::Status Error(absl::StatusCode code, absl::string_view what) const;
  absl::Status IoError(absl::string_view what, int err) const;

  std::string path_;
  std::FILE* file_ = nullptr;  // owned
  std::string kv_bytes_;       // encoded key/value pairs
  std::vector<std::string> keys_;
  uint32_t alignment_ = 32;
  bool alignment_set_ = false;
  bool bad_alignment_ = false;
  std::vector<TensorDecl> tensors_;
  uint64_t data_bytes_ = 0;
  uint64_t data_offset_ = 0;
  uint64_t pos_ = 0;  // bytes written so far
  bool header_written_ = false;
  bool finished_ = false;
  size_t current_ = 0;            // tensor being written
  uint64_t current_written_ = 0;  // its bytes so far
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SYNTH_GGUF_WRITER_H_
