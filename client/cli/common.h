// What the dllm-client commands share: the flag sets, building requests
// from flags, connecting, and the two ways a command fails (usage errors
// exit 2, failures exit 1).
#ifndef DLLM_CLIENT_CLI_COMMON_H_
#define DLLM_CLIENT_CLI_COMMON_H_

#include <google/protobuf/message.h>

#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/dllm_client.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/base/flags.h"

namespace dllm::client_cli {

extern const char* const kUsage;

extern const std::set<std::string> kBoolFlags;
extern const std::set<std::string> kConnectionFlags;
extern const std::set<std::string> kGenerationFlags;
std::set<std::string> Union(std::set<std::string> a, const std::set<std::string>& b);
// Every flag that takes a value, over all commands (each command then
// checks its own with CheckOnly).
std::set<std::string> ValueFlags();

// Prints "error: CODE: message" and returns 1.
int Fail(const absl::Status& status);
// Prints "dllm-client: message" and the usage, and returns 2.
int UsageError(const absl::Status& status);
std::string ToJson(const google::protobuf::Message& message);
std::string AlgorithmName(v1::Algorithm algorithm);
std::string FinishName(v1::FinishReason reason);

absl::Status FillPrompt(const ParsedFlags& flags, v1::Prompt* prompt);
absl::Status FillSettings(const ParsedFlags& flags, v1::DiffusionParams* diffusion,
                          v1::SamplingParams* sampling);
absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const ParsedFlags& flags);
// A client for the connection flags, or nullptr once the error is printed
// and *exit_code set: 2 for a bad flag value, 1 when the client cannot be made.
std::unique_ptr<DllmClient> Connect(const ParsedFlags& flags, int* exit_code);

// The commands.
int RunGenerate(const ParsedFlags& flags);
int RunStep(const ParsedFlags& flags);
int RunInfo(const ParsedFlags& flags);
int RunHealth(const ParsedFlags& flags);
int RunTokenize(const ParsedFlags& flags);

}  // namespace dllm::client_cli

#endif  // DLLM_CLIENT_CLI_COMMON_H_
