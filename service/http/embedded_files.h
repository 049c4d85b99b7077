// Files compiled into the binary (cmake/EmbedFiles.cmake): the live canvas
// page that GET / serves (service/http/page/).
#ifndef DLLM_SERVICE_HTTP_EMBEDDED_FILES_H_
#define DLLM_SERVICE_HTTP_EMBEDDED_FILES_H_

#include <span>
#include <string_view>

namespace dllm {

struct EmbeddedFile {
  std::string_view path;  // the URL path, e.g. "/canvas.js"
  std::string_view bytes;
};

extern const std::span<const EmbeddedFile> kEmbeddedFiles;

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_EMBEDDED_FILES_H_
