#include "service/cli/file_digest.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

struct DigestContextDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using DigestContext = std::unique_ptr<EVP_MD_CTX, DigestContextDeleter>;

absl::StatusOr<DigestContext> StartSha256() {
  DigestContext ctx(EVP_MD_CTX_new());
  if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("OpenSSL: cannot start a SHA-256 digest");
  }
  return ctx;
}

std::string FinishHex(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx, digest, &size);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
}

}  // namespace

std::string Sha256Hex(absl::string_view bytes) {
  absl::StatusOr<DigestContext> ctx = StartSha256();
  if (!ctx.ok()) return "";
  EVP_DigestUpdate(ctx->get(), bytes.data(), bytes.size());
  return FinishHex(ctx->get());
}

absl::StatusOr<std::string> Sha256File(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  absl::StatusOr<DigestContext> ctx = StartSha256();
  if (!ctx.ok()) return ctx.status();
  std::vector<char> chunk(1 << 20);
  size_t got = 0;
  while ((got = std::fread(chunk.data(), 1, chunk.size(), file.get())) > 0) {
    EVP_DigestUpdate(ctx->get(), chunk.data(), got);
  }
  if (std::ferror(file.get())) {
    return absl::DataLossError(absl::StrCat(path, ": read error: ", std::strerror(errno)));
  }
  return FinishHex(ctx->get());
}

}  // namespace dllm
