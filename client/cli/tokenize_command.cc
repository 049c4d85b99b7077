// dllm-client tokenize: token ids and pieces of a text, as the server tokenizes it.
#include <cstdio>
#include <string>

#include "client/canvas_view.h"
#include "client/cli/common.h"

namespace dllm::client_cli {

int RunTokenize(const ParsedFlags& flags) {
  if (auto s = flags.CheckOnly(Union(kConnectionFlags, {"chat", "system", "json"})); !s.ok()) {
    return UsageError(s);
  }
  if (flags.positional.size() != 1) {
    return UsageError(absl::InvalidArgumentError("expected one TEXT argument (quote it)"));
  }
  v1::TokenizeRequest request;
  request.set_text(flags.positional[0]);
  request.set_apply_chat_template(flags.Has("chat"));
  request.set_system(flags.Get("system"));
  int exit_code = 0;
  const std::unique_ptr<DllmClient> client = Connect(flags, &exit_code);
  if (client == nullptr) return exit_code;
  auto response = client->Tokenize(request);
  if (!response.ok()) return Fail(response.status());
  if (flags.Has("json")) {
    std::printf("%s\n", ToJson(*response).c_str());
    return 0;
  }
  std::printf("%d tokens\n", response->ids_size());
  for (int i = 0; i < response->ids_size(); ++i) {
    std::printf("%u\t%s\n", response->ids(i),
                i < response->pieces_size() ? VisiblePiece(response->pieces(i)).c_str() : "");
  }
  return 0;
}

}  // namespace dllm::client_cli
