// libFuzzer target: any bytes as the body of POST /v1/completions and
// /v1/chat/completions must give a request or an error naming a field and a
// 4xx status (never a crash, a hang or a 500), and what the parser accepts
// the gRPC validation must judge without crashing. Each accepted request's
// stop strings also run through StopText on a split of the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "service/engine/request_validation.h"
#include "service/http/api_error.h"
#include "service/http/openai_request.h"
#include "service/http/stop_text.h"

namespace {

const char* kModelPath = DLLM_TEST_DATA_DIR "/models/tiny-llada-k-q4_k_m.gguf";

const dllm::Model& TheModel() {
  static const std::shared_ptr<const dllm::Model> model = [] {
    auto m = dllm::Model::Load(kModelPath, {dllm::IsaLevel::kScalar});
    if (!m.ok()) std::abort();
    return *m;
  }();
  return *model;
}

void Check(dllm::OpenAiEndpoint endpoint, const dllm::Json& body, absl::string_view text) {
  absl::StatusOr<dllm::OpenAiRequest> r =
      dllm::ParseOpenAiRequest(endpoint, body, TheModel(), kModelPath);
  if (!r.ok()) {
    const dllm::ApiError e = dllm::ApiErrorFromStatus(r.status(), endpoint);
    if (e.status < 400 || e.status >= 500) __builtin_trap();
    return;
  }
  (void)dllm::ValidateGenerateRequest(r->generate, TheModel(), kModelPath);
  dllm::StopText stop(r->stop);
  const size_t half = text.size() / 2;
  std::string out = stop.Add(text.substr(0, half));
  out += stop.Add(text.substr(half));
  out += stop.Finish();
  if (out != stop.text()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<dllm::Json> body = dllm::ParseJson(text);
  if (!body.ok()) return 0;
  Check(dllm::OpenAiEndpoint::kCompletions, *body, text);
  Check(dllm::OpenAiEndpoint::kChatCompletions, *body, text);
  return 0;
}
