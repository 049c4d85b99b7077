#include "engine/gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dllm {

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer;
  // anything but a regular file is refused below. It changes nothing for
  // reading or mapping a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    std::string msg = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat(path, ": fstat failed: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a regular file (a model must be a GGUF file, not a pipe or a device)"));
  }
  if (st.st_size == 0) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (data == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": mmap of ", size, " bytes failed: ", std::strerror(err)));
  }
  return MappedFile(path, static_cast<const uint8_t*>(data), size);
}

namespace {

// A bounce buffer of its own mapping, so that its pages leave the process
// when it does (a heap block could stay resident in an allocator's cache).
class BounceBuffer {
 public:
  explicit BounceBuffer(size_t bytes)
      : bytes_(bytes),
        data_(static_cast<uint8_t*>(
            ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {}
  ~BounceBuffer() {
    if (data_ != MAP_FAILED) ::munmap(data_, bytes_);
  }
  bool ok() const { return data_ != MAP_FAILED; }
  uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  const size_t bytes_;
  uint8_t* const data_;
};

// Replaces [begin, end) (page-aligned) with anonymous pages. `copy`: holding
// the bytes they held, through `buffer`; otherwise zero pages.
absl::Status ReplaceWithAnonymous(uint8_t* begin, uint8_t* end, bool copy,
                                  const BounceBuffer& buffer) {
  for (uint8_t* p = begin; p < end;) {
    const size_t n =
        copy ? std::min(buffer.size(), static_cast<size_t>(end - p)) : static_cast<size_t>(end - p);
    if (copy) std::memcpy(buffer.data(), p, n);
    void* got = ::mmap(p, n, copy ? PROT_READ | PROT_WRITE : PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (got == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot replace ", n, " mapped bytes with memory: ", std::strerror(errno)));
    }
    if (copy) {
      std::memcpy(p, buffer.data(), n);
      ::mprotect(p, n, PROT_READ);
    }
    p += n;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MappedFile::DetachFromFile(std::vector<Range> dropped) {
  if (data_ == nullptr) return absl::OkStatus();
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  uint8_t* const base = const_cast<uint8_t*>(data_);
  const size_t mapped = (size_ + page - 1) / page * page;
  // Whole pages inside each dropped range, sorted and merged.
  std::vector<std::pair<size_t, size_t>> zero;
  for (const Range& r : dropped) {
    const size_t lo = (std::min(r.offset, size_) + page - 1) / page * page;
    const size_t hi = std::min(r.offset + r.bytes, size_) / page * page;
    if (lo < hi) zero.emplace_back(lo, hi);
  }
  std::sort(zero.begin(), zero.end());
  const BounceBuffer buffer(size_t{4} << 20);
  if (!buffer.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path_, ": cannot map a buffer to copy the file: ", std::strerror(errno)));
  }
  // Kept pages up to each dropped range, the range itself, then the rest.
  zero.emplace_back(mapped, mapped);
  size_t at = 0;  // everything before `at` is done
  for (const auto& [lo, hi] : zero) {
    const size_t from = std::max(lo, at);
    absl::Status s = ReplaceWithAnonymous(base + at, base + std::max(from, at), true, buffer);
    if (s.ok()) s = ReplaceWithAnonymous(base + from, base + std::max(hi, from), false, buffer);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(path_, ": ", s.message()));
    at = std::max(at, hi);
  }
  return absl::OkStatus();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace dllm
