// SHA-256 of model files, for the result files that name what they were
// made from. OpenSSL's libcrypto does the hashing.
#ifndef DLLM_SERVICE_CLI_FILE_DIGEST_H_
#define DLLM_SERVICE_CLI_FILE_DIGEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dllm {

// Lower-case hex SHA-256 of `bytes`.
std::string Sha256Hex(absl::string_view bytes);

// Digest of a file read in 1 MiB chunks (its pages stay out of this
// process's resident set, unlike hashing a mapping).
absl::StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_FILE_DIGEST_H_
