// dllm-client: flags, requests and connections shared by the commands.
#include "client/cli/common.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/base/status_macros.h"

namespace dllm::client_cli {
namespace {

// A proto enum flag by its value name without `prefix`, any case; `names`
// lists the values for the error.
template <typename Enum, typename Parse>
absl::Status ParseEnumFlag(const char* flag, const std::string& name, absl::string_view prefix,
                           Parse parse, Enum unspecified, absl::string_view names, Enum* out) {
  if (parse(absl::StrCat(prefix, absl::AsciiStrToUpper(name)), out) && *out != unspecified) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": unknown ", name, " (", names, ")"));
}

// The connection flags; a bad value is a usage error.
absl::StatusOr<ClientOptions> ConnectionOptions(const ParsedFlags& flags) {
  ClientOptions options;
  options.target = flags.Get("target", options.target);
  options.tls_ca_file = flags.Get("tls-ca");
  options.tls_server_name = flags.Get("tls-server-name");
  DLLM_RETURN_IF_ERROR(flags.GetNumber("timeout-seconds", &options.timeout_seconds));
  if (flags.Has("timeout-seconds") && !(options.timeout_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeout-seconds: '", flags.Get("timeout-seconds"), "' must be > 0 seconds"));
  }
  return options;
}

// Sets a numeric field of `message` from flag `name` when it is given; a
// value the field's type cannot hold is a usage error naming the flag.
template <typename Message, typename T>
absl::Status SetFromFlag(const ParsedFlags& flags, const std::string& name, Message* message,
                         void (Message::*set)(T)) {
  if (!flags.Has(name)) return absl::OkStatus();
  T value{};
  DLLM_RETURN_IF_ERROR(flags.GetNumber(name, &value));
  (message->*set)(value);
  return absl::OkStatus();
}

}  // namespace

const char* const kUsage =
    "usage: dllm-client COMMAND [options] [ARG]   (options before or after COMMAND)\n"
    "commands:\n"
    "  generate [generation options] [--show-canvas] [--json] PROMPT\n"
    "      streams the text as it stabilizes (--json: one JSON event per line)\n"
    "  step [generation options] PROMPT\n"
    "      a client-driven session; reads commands from stdin:\n"
    "      advance [N] | forward [K] [POS...] | commit POS=TOKEN ... | rewind STEP |\n"
    "      canvas | close\n"
    "  info [--json]                       model and server information\n"
    "  health [--service NAME] [--wait-seconds S]   exit 0 when SERVING\n"
    "  tokenize [--chat] [--system S] [--json] TEXT\n"
    "connection options: --target HOST:PORT (default 127.0.0.1:50051) --tls-ca FILE\n"
    "  [--tls-server-name NAME] --timeout-seconds S (deadline; unary calls default 30)\n"
    "generation options: --gen-length N --steps N --block-length N --algorithm NAME\n"
    "  (low_confidence, random, origin, maskgit_plus, topk_margin, entropy)\n"
    "  --temperature T --top-p P --top-k K --alg-temp T --eps E --cfg C --seed S\n"
    "  --threshold X --no-early-exit --chat --system S --tokens 1,2,3 (instead of PROMPT)\n"
    "  --suffix TEXT | --suffix-tokens 4,5 (infill: gen-length masks between prompt and suffix)\n"
    "  --cache none|prefix|dual --cache-refresh R (approximate K/V caches)\n"
    "  --detail final|text|steps|canvas --step-stride N --top-candidates K --timings\n"
    "  --model NAME --request-id ID\n";

const std::set<std::string> kBoolFlags = {"show-canvas", "json", "chat", "no-early-exit",
                                          "timings"};

const std::set<std::string> kConnectionFlags = {"target", "tls-ca", "tls-server-name",
                                                "timeout-seconds"};
const std::set<std::string> kGenerationFlags = {
    "gen-length",  "steps",          "block-length",  "algorithm", "alg",          "temperature",
    "top-p",       "top-k",          "alg-temp",      "eps",       "cfg",          "seed",
    "threshold",   "no-early-exit",  "chat",          "system",    "tokens",       "detail",
    "step-stride", "top-candidates", "timings",       "model",     "request-id",   "show-canvas",
    "json",        "cache",          "cache-refresh", "suffix",    "suffix-tokens"};

std::set<std::string> Union(std::set<std::string> a, const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

std::set<std::string> ValueFlags() {
  std::set<std::string> all =
      Union(Union(kConnectionFlags, kGenerationFlags), {"service", "wait-seconds"});
  for (const std::string& b : kBoolFlags) all.erase(b);
  return all;
}

// ---- output helpers ----

int Fail(const absl::Status& status) {
  std::fflush(stdout);  // what was printed before the error comes first
  std::fprintf(stderr, "error: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return 1;
}

int UsageError(const absl::Status& status) {
  std::fprintf(stderr, "dllm-client: %s\n%s", std::string(status.message()).c_str(), kUsage);
  return 2;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) return "{}";
  return out;
}

std::string AlgorithmName(v1::Algorithm algorithm) {
  return absl::AsciiStrToLower(absl::StripPrefix(v1::Algorithm_Name(algorithm), "ALGORITHM_"));
}

std::string FinishName(v1::FinishReason reason) {
  return std::string(absl::StripPrefix(v1::FinishReason_Name(reason), "FINISH_REASON_"));
}

// ---- building requests from flags ----

// "1,2,3" as token ids; errors name `flag`.
absl::Status ParseIds(const ParsedFlags& flags, const char* flag, v1::TokenIds* ids) {
  for (absl::string_view part : absl::StrSplit(flags.Get(flag), ',', absl::SkipEmpty())) {
    uint32_t id;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": not a token id: ", part));
    }
    ids->add_ids(id);
  }
  return absl::OkStatus();
}

absl::Status FillPrompt(const ParsedFlags& flags, v1::Prompt* prompt) {
  if (flags.Has("suffix") && flags.Has("suffix-tokens")) {
    return absl::InvalidArgumentError("give either --suffix or --suffix-tokens, not both");
  }
  if (flags.Has("suffix")) prompt->mutable_suffix()->set_text(flags.Get("suffix"));
  if (flags.Has("suffix-tokens")) {
    DLLM_RETURN_IF_ERROR(
        ParseIds(flags, "suffix-tokens", prompt->mutable_suffix()->mutable_token_ids()));
  }
  if (flags.Has("tokens")) {
    if (!flags.positional.empty()) {
      return absl::InvalidArgumentError("give either --tokens or a PROMPT, not both");
    }
    DLLM_RETURN_IF_ERROR(ParseIds(flags, "tokens", prompt->mutable_token_ids()));
  } else {
    if (flags.positional.size() != 1) {
      return absl::InvalidArgumentError("expected one PROMPT argument (quote it)");
    }
    prompt->set_text(flags.positional[0]);
  }
  prompt->set_apply_chat_template(flags.Has("chat"));
  if (flags.Has("system")) prompt->set_system(flags.Get("system"));
  return absl::OkStatus();
}

absl::Status FillSettings(const ParsedFlags& flags, v1::DiffusionParams* diffusion,
                          v1::SamplingParams* sampling) {
  using D = v1::DiffusionParams;
  using S = v1::SamplingParams;
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "gen-length", diffusion, &D::set_gen_length));
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "steps", diffusion, &D::set_steps));
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "block-length", diffusion, &D::set_block_length));
  const std::string algorithm = flags.Get("algorithm", flags.Get("alg"));
  if (!algorithm.empty()) {
    v1::Algorithm a;
    DLLM_RETURN_IF_ERROR(ParseEnumFlag("algorithm", algorithm, "ALGORITHM_", v1::Algorithm_Parse,
                                       v1::ALGORITHM_UNSPECIFIED,
                                       "low_confidence, random, origin, maskgit_plus, topk_margin, "
                                       "entropy",
                                       &a));
    diffusion->set_algorithm(a);
  }
  if (flags.Has("cache")) {
    v1::Cache cache;
    DLLM_RETURN_IF_ERROR(ParseEnumFlag("cache", flags.Get("cache"), "CACHE_", v1::Cache_Parse,
                                       v1::CACHE_UNSPECIFIED, "none, prefix, dual", &cache));
    diffusion->set_cache(cache);
  }
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "cache-refresh", diffusion, &D::set_cache_refresh_steps));
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "threshold", diffusion, &D::set_threshold));
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "eps", diffusion, &D::set_eps));
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "cfg", diffusion, &D::set_cfg_scale));
  if (flags.Has("no-early-exit")) diffusion->set_early_exit(false);
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "temperature", sampling, &S::set_temperature));
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "top-p", sampling, &S::set_top_p));
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "top-k", sampling, &S::set_top_k));
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "alg-temp", sampling, &S::set_alg_temp));
  DLLM_RETURN_IF_ERROR(SetFromFlag(flags, "seed", sampling, &S::set_seed));
  return absl::OkStatus();
}

absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const ParsedFlags& flags) {
  v1::GenerateRequest request;
  request.set_request_id(flags.Get("request-id"));
  request.set_model(flags.Get("model"));
  DLLM_RETURN_IF_ERROR(FillPrompt(flags, request.mutable_prompt()));
  DLLM_RETURN_IF_ERROR(
      FillSettings(flags, request.mutable_diffusion(), request.mutable_sampling()));
  v1::StreamOptions* stream = request.mutable_stream();
  const std::string detail = flags.Get("detail", flags.Has("show-canvas") ? "canvas" : "text");
  static const std::map<std::string, v1::Detail> kDetails = {{"final", v1::DETAIL_FINAL_ONLY},
                                                             {"text", v1::DETAIL_TEXT},
                                                             {"steps", v1::DETAIL_STEPS},
                                                             {"canvas", v1::DETAIL_CANVAS}};
  auto it = kDetails.find(detail);
  if (it == kDetails.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--detail: unknown ", detail, " (final, text, steps, canvas)"));
  }
  stream->set_detail(it->second);
  DLLM_RETURN_IF_ERROR(
      SetFromFlag(flags, "step-stride", stream, &v1::StreamOptions::set_step_stride));
  DLLM_RETURN_IF_ERROR(
      SetFromFlag(flags, "top-candidates", stream, &v1::StreamOptions::set_top_candidates));
  stream->set_include_timings(flags.Has("timings") || flags.Has("show-canvas"));
  return request;
}

// A client for the connection flags, or nullptr once the error is printed
// and *exit_code set: 2 for a bad flag value, 1 when the client cannot be made.
std::unique_ptr<DllmClient> Connect(const ParsedFlags& flags, int* exit_code) {
  absl::StatusOr<ClientOptions> options = ConnectionOptions(flags);
  if (!options.ok()) {
    *exit_code = UsageError(options.status());
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<DllmClient>> client = DllmClient::Create(*options);
  if (!client.ok()) {
    *exit_code = Fail(client.status());
    return nullptr;
  }
  return *std::move(client);
}

}  // namespace dllm::client_cli
