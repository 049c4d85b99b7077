// SHA-256 (FIPS 180-4), for identifying model files in result files.
#ifndef DLLM_ENGINE_BASE_SHA256_H_
#define DLLM_ENGINE_BASE_SHA256_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace dllm {

// Incremental hashing: Update() any number of times, then HexDigest() once.
class Sha256 {
 public:
  Sha256();
  void Update(const uint8_t* data, size_t size);
  std::string HexDigest();  // lower-case hex

 private:
  uint32_t h_[8];
  uint8_t buffer_[64] = {};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

// Lower-case hex digest of `size` bytes at `data`.
std::string Sha256Hex(const uint8_t* data, size_t size);

// Digest of a file read in 1 MiB chunks (its pages stay out of this
// process's resident set, unlike hashing a mapping).
absl::StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace dllm

#endif  // DLLM_ENGINE_BASE_SHA256_H_
