// dllm-client info: model and server information.
#include <cstdio>
#include <string>

#include "absl/strings/str_join.h"
#include "client/cli/common.h"

namespace dllm::client_cli {

int RunInfo(const ParsedFlags& flags) {
  if (auto s = flags.CheckOnly(Union(kConnectionFlags, {"json"})); !s.ok()) return UsageError(s);
  int exit_code = 0;
  const std::unique_ptr<DllmClient> client = Connect(flags, &exit_code);
  if (client == nullptr) return exit_code;
  auto model = client->GetModelInfo();
  if (!model.ok()) return Fail(model.status());
  auto server = client->GetServerInfo();
  if (!server.ok()) return Fail(server.status());
  if (flags.Has("json")) {
    std::printf("{\"model\":%s,\"server\":%s}\n", ToJson(*model).c_str(), ToJson(*server).c_str());
    return 0;
  }
  const v1::ModelInfo& m = *model;
  const v1::ServerInfo& sv = *server;
  std::printf("model: %s\n", m.name().c_str());
  std::printf("  architecture: %s, %u layers, n_embd %u, vocab %u, max context %u\n",
              m.architecture().c_str(), m.n_layer(), m.n_embd(), m.vocab_size(), m.max_context());
  std::printf("  weights: %s, %llu bytes (file %llu bytes)\n", m.weight_format().c_str(),
              static_cast<unsigned long long>(m.weight_bytes()),
              static_cast<unsigned long long>(m.file_bytes()));
  std::printf("  mask token %u, eos %s, chat template %s\n", m.mask_token_id(),
              absl::StrJoin(m.eos_token_ids(), ",").c_str(), m.chat_template().c_str());
  std::printf("  defaults: gen_length %u, steps %u, block_length %u, algorithm %s\n",
              m.default_diffusion().gen_length(), m.default_diffusion().steps(),
              m.default_diffusion().block_length(),
              AlgorithmName(m.default_diffusion().algorithm()).c_str());
  std::printf("server: dllm %s%s%s\n", sv.version().c_str(), sv.git_sha().empty() ? "" : " ",
              sv.git_sha().c_str());
  std::printf(
      "  cpu: %s, isa %s, %u engine threads (%u performance, %u efficiency cores), policy %s\n",
      sv.cpu().c_str(), sv.isa().c_str(), sv.engine_threads(), sv.performance_cores(),
      sv.efficiency_cores(), sv.cpu_policy().c_str());
  std::printf("  requests: %u running (max %u), %u waiting (max %u); sessions %u (max %u)\n",
              sv.requests_running(), sv.max_running(), sv.requests_waiting(), sv.max_waiting(),
              sv.sessions_open(), sv.max_sessions());
  std::printf("  uptime %.1f s%s\n", sv.uptime_seconds(), sv.draining() ? ", draining" : "");
  return 0;
}

}  // namespace dllm::client_cli
