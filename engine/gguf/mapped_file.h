// A read-only memory mapping of a whole file (RAII, move-only).
#ifndef DLLM_ENGINE_GGUF_MAPPED_FILE_H_
#define DLLM_ENGINE_GGUF_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dllm {

class MappedFile {
 public:
  // Maps `path` read-only. NOT_FOUND when it does not exist, INVALID_ARGUMENT
  // when it is not a regular file or is empty.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // A byte range of the file: [offset, offset + bytes).
  struct Range {
    size_t offset = 0;
    size_t bytes = 0;
  };
  // Cuts the mapping loose from the file, keeping every address valid: the
  // pages that hold `dropped` ranges (rounded inwards to whole pages) become
  // zero pages, and every other page is copied into anonymous memory at the
  // same address. Afterwards nothing done to the file (truncated,
  // overwritten, deleted) reaches the process, which a file-backed page
  // would (SIGBUS past a truncation, new bytes after an overwrite). Copies
  // through a bounded buffer, so resident memory grows by the kept pages
  // only. On error the mapping may be partly replaced: give up the file.
  absl::Status DetachFromFile(std::vector<Range> dropped);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void Reset();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_GGUF_MAPPED_FILE_H_
