// SHA-256 (FIPS 180-4), for identifying model files in result files.
#ifndef DLLM_ENGINE_BASE_SHA256_H_
#define DLLM_ENGINE_BASE_SHA256_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace dllm {

// Lower-case hex digest of `size` bytes at `data`.
std::string Sha256Hex(const uint8_t* data, size_t size);

}  // namespace dllm

#endif  // DLLM_ENGINE_BASE_SHA256_H_
