#include "service/http/openai_request.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "engine/sampler/sampler_config.h"
#include "engine/tokenizer/chat_template.h"
#include "service/server/request_validation.h"

namespace dllm {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// OpenAI fields dllm takes only at their neutral value: anything else would
// be silently ignored, so it is refused instead.
constexpr NeutralField kNeutralFields[] = {
    {"frequency_penalty", 0},
    {"presence_penalty", 0},
    {"n", 1},
    {"best_of", 1},
};

// The fields each endpoint reads (the neutral ones above come on top).
const std::set<std::string, std::less<>>& KnownFields(OpenAiEndpoint endpoint) {
  static const std::set<std::string, std::less<>> kCompletions = {
      "model", "prompt", "max_tokens", "temperature", "top_p", "seed", "stop", "stream",
      "stream_options", "user", "logprobs", "echo", "suffix",
      // Diffusion extras.
      "steps", "block_length", "algorithm", "threshold", "alg_temp", "cfg_scale", "eps", "top_k",
      "cache", "cache_refresh", "dllm_canvas",
      // The entropy-bound sampler (DiffusionGemma), named as its GGUF keys.
      "sampler", "eb_max_steps", "eb_t_min", "eb_t_max", "eb_entropy_bound",
      "eb_stability_threshold", "eb_confidence_threshold",
      // LLaDA2.0 / 2.1's sampler, named as the official sampler's settings.
      "steps_per_block", "editing_threshold", "max_post_steps"};
  static const std::set<std::string, std::less<>> kChat = [] {
    std::set<std::string, std::less<>> s = kCompletions;
    s.erase("prompt");
    s.erase("echo");
    s.erase("suffix");
    s.insert({"messages", "max_completion_tokens", "top_logprobs"});
    return s;
  }();
  return endpoint == OpenAiEndpoint::kCompletions ? kCompletions : kChat;
}

}  // namespace

absl::Status CheckNeutral(std::span<const NeutralField> fields, const std::string& key,
                          const Json& value, absl::string_view why, bool* listed) {
  *listed = false;
  for (const NeutralField& f : fields) {
    if (key != f.name) continue;
    *listed = true;
    if (!value.is_null() && !(value.is_number() && value.get<double>() == f.neutral)) {
      return Invalid(key, absl::StrCat("only ", f.neutral, " is supported", why));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadBool(const Json& body, const char* field, bool* out) {
  const Json* v = FindMember(body, field);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (!v->is_boolean()) return Invalid(field, "must be a boolean");
  *out = v->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadNumber(const Json& body, const char* field, double lo, double hi,
                        std::optional<double>* out) {
  const Json* v = FindMember(body, field);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (!v->is_number()) return Invalid(field, "must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    return Invalid(field, absl::StrCat(x, " is outside [", lo, ", ", hi, "]"));
  *out = x;
  return absl::OkStatus();
}

absl::Status ReadInteger(const Json& body, const char* field, int64_t lo, int64_t hi,
                         std::optional<int64_t>* out) {
  const Json* v = FindMember(body, field);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (v->is_number_unsigned()) {
    const uint64_t x = v->get<uint64_t>();
    if (x > static_cast<uint64_t>(hi)) return Invalid(field, absl::StrCat(x, " exceeds ", hi));
    *out = static_cast<int64_t>(x);
  } else if (v->is_number_integer()) {
    *out = v->get<int64_t>();
  } else {
    return Invalid(field, "must be an integer");
  }
  if (**out < lo || **out > hi)
    return Invalid(field, absl::StrCat(**out, " is outside [", lo, ", ", hi, "]"));
  return absl::OkStatus();
}

absl::Status ReadString(const Json& body, const char* field, std::string* out) {
  const Json* v = FindMember(body, field);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (!v->is_string()) return Invalid(field, "must be a string");
  *out = v->get<std::string>();
  return absl::OkStatus();
}

namespace {

absl::Status CheckFields(OpenAiEndpoint endpoint, const Json& body) {
  if (!body.is_object()) return Invalid("body", "must be a JSON object");
  const auto& known = KnownFields(endpoint);
  for (const auto& [key, value] : body.items()) {
    if (known.count(key) > 0) continue;
    bool neutral_field = false;
    DLLM_RETURN_IF_ERROR(CheckNeutral(kNeutralFields, key, value, "", &neutral_field));
    if (!neutral_field) return Invalid(key, "unknown field");
  }
  return absl::OkStatus();
}

// The completions prompt: a string, or an array of token ids; and the
// suffix to infill before (a string; empty or null: none).
absl::Status ReadCompletionPrompt(const Json& body, v1::Prompt* prompt) {
  std::string suffix;
  DLLM_RETURN_IF_ERROR(ReadString(body, "suffix", &suffix));
  if (!suffix.empty()) prompt->mutable_suffix()->set_text(std::move(suffix));
  const Json* v = FindMember(body, "prompt");
  if (v == nullptr || v->is_null()) return Invalid("prompt", "is required");
  if (v->is_string()) {
    prompt->set_text(v->get<std::string>());
    return absl::OkStatus();
  }
  if (v->is_array() && !v->empty() && (*v)[0].is_string()) {
    return Invalid("prompt", "one prompt per request (an array of strings is not supported)");
  }
  if (!v->is_array() || v->empty()) {
    return Invalid("prompt", "must be a string or a non-empty array of token ids");
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& id = (*v)[i];
    if (!id.is_number_unsigned() || id.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      return Invalid(absl::StrCat("prompt[", i, "]"),
                     "must be a token id (a non-negative integer)");
    }
    prompt->mutable_token_ids()->add_ids(static_cast<uint32_t>(id.get<uint64_t>()));
  }
  return absl::OkStatus();
}

// A message's content: a string, or an array of {"type": "text", "text"}.
absl::StatusOr<std::string> MessageContent(const Json& message, const std::string& field) {
  const Json* content = FindMember(message, "content");
  if (content == nullptr || content->is_null()) return std::string();
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array())
    return Invalid(field + ".content", "must be a string or an array of parts");
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_field = absl::StrCat(field, ".content[", i, "]");
    const Json* type = FindMember(part, "type");
    const Json* part_text = FindMember(part, "text");
    if (type == nullptr || !type->is_string() || type->get<std::string>() != "text") {
      return Invalid(part_field, "only parts of type \"text\" are supported");
    }
    if (part_text == nullptr || !part_text->is_string()) {
      return Invalid(part_field + ".text", "must be a string");
    }
    text += part_text->get<std::string>();
  }
  return text;
}

// The chat messages rendered by the model's chat template, as token ids.
absl::Status ReadChatPrompt(const Json& body, const Model& model, v1::Prompt* prompt) {
  const Json* messages = FindMember(body, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return Invalid("messages", "must be a non-empty array");
  }
  // Every turn renders to at least one token, so more turns than the
  // context holds cannot fit (140k empty turns were 2.6M tokens).
  const int64_t n_ctx = model.config().n_ctx_train;
  if (static_cast<int64_t>(messages->size()) > n_ctx) {
    return Invalid("messages",
                   absl::StrCat(messages->size(), " messages cannot fit the model's context of ",
                                n_ctx, " tokens"));
  }
  std::vector<ChatMessage> turns;
  size_t bytes = 0;
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return Invalid(field, "must be an object");
    const Json* role = FindMember(m, "role");
    if (role == nullptr || !role->is_string()) return Invalid(field + ".role", "must be a string");
    ChatMessage turn;
    turn.role = role->get<std::string>();
    // OpenAI's newer name for the system turn.
    if (turn.role == "developer") turn.role = "system";
    if (turn.role != "system" && turn.role != "user" && turn.role != "assistant") {
      return Invalid(field + ".role",
                     absl::StrCat("'", turn.role, "' is not one of system, user, assistant"));
    }
    for (const auto& [key, value] : m.items()) {
      if (key != "role" && key != "content" && key != "name") {
        return Invalid(absl::StrCat(field, ".", key), "unknown field");
      }
    }
    absl::StatusOr<std::string> content = MessageContent(m, field);
    if (!content.ok()) return content.status();
    turn.content = std::move(*content);
    bytes += turn.content.size();
    turns.push_back(std::move(turn));
  }
  // As for a text prompt: more bytes than the context could hold in the
  // longest tokens cannot fit, whatever they encode to.
  const size_t max_bytes =
      static_cast<size_t>(model.config().n_ctx_train) * model.tokenizer().max_token_bytes();
  if (bytes > max_bytes) {
    return Invalid("messages",
                   absl::StrCat(bytes, " bytes of content cannot fit the model's context"));
  }
  for (int32_t id : EncodeChat(model.tokenizer(), model.chat_template(), turns)) {
    prompt->mutable_token_ids()->add_ids(static_cast<uint32_t>(id));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadStop(const Json& body, size_t max_strings, std::vector<std::string>* stop) {
  const Json* v = FindMember(body, "stop");
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (v->is_string()) {
    stop->push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > max_strings) {
      return Invalid("stop", absl::StrCat("at most ", max_strings, " strings"));
    }
    for (const Json& s : *v) {
      if (!s.is_string()) return Invalid("stop", "must be a string or an array of strings");
      stop->push_back(s.get<std::string>());
    }
  } else {
    return Invalid("stop", "must be a string or an array of strings");
  }
  for (const std::string& s : *stop) {
    if (s.empty()) return Invalid("stop", "a stop string must not be empty");
  }
  return absl::OkStatus();
}

namespace {

// A proto enum by its value name, with or without `prefix`, in any case
// ("entropy", "ALGORITHM_ENTROPY"); `names` lists the values for the error.
// Leaves `out` alone when the field is absent or null.
template <typename Enum, typename Parse>
absl::Status ReadEnum(const Json& body, const char* field, absl::string_view prefix, Parse parse,
                      Enum unspecified, absl::string_view names, std::optional<Enum>* out) {
  std::string text;
  DLLM_RETURN_IF_ERROR(ReadString(body, field, &text));
  if (text.empty()) return absl::OkStatus();
  std::string name = absl::AsciiStrToUpper(text);
  if (!absl::StartsWith(name, prefix)) name = absl::StrCat(prefix, name);
  Enum value;
  if (!parse(name, &value) || value == unspecified) {
    return Invalid(field, absl::StrCat("unknown ", field, " '", text, "' (", names, ")"));
  }
  *out = value;
  return absl::OkStatus();
}

// max_tokens, then ReadGenerationSettings.
absl::Status ReadSettings(OpenAiEndpoint endpoint, const Json& body, OpenAiRequest* out) {
  v1::DiffusionParams& d = *out->generate.mutable_diffusion();
  std::optional<int64_t> i;
  const char* max_tokens = "max_tokens";
  if (endpoint == OpenAiEndpoint::kChatCompletions && FindMember(body, "max_completion_tokens")) {
    max_tokens = "max_completion_tokens";
  }
  DLLM_RETURN_IF_ERROR(ReadInteger(body, max_tokens, 1, 1 << 20, &i));
  if (i) d.set_gen_length(static_cast<uint32_t>(*i));
  return ReadGenerationSettings(body, &out->generate);
}

}  // namespace

absl::Status ReadGenerationSettings(const Json& body, v1::GenerateRequest* generate) {
  v1::DiffusionParams& d = *generate->mutable_diffusion();
  v1::SamplingParams& s = *generate->mutable_sampling();
  std::optional<int64_t> i;
  std::optional<double> x;
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "steps", 1, 1 << 20, &i));
  if (i) d.set_steps(static_cast<uint32_t>(*i)), i.reset();
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "block_length", 1, 1 << 20, &i));
  if (i) d.set_block_length(static_cast<uint32_t>(*i)), i.reset();
  std::optional<v1::Algorithm> algorithm;
  DLLM_RETURN_IF_ERROR(
      ReadEnum(body, "algorithm", "ALGORITHM_", v1::Algorithm_Parse, v1::ALGORITHM_UNSPECIFIED,
               "low_confidence, random, origin, maskgit_plus, topk_margin, entropy", &algorithm));
  if (algorithm) d.set_algorithm(*algorithm);
  std::optional<v1::Cache> cache;
  DLLM_RETURN_IF_ERROR(ReadEnum(body, "cache", "CACHE_", v1::Cache_Parse, v1::CACHE_UNSPECIFIED,
                                "none, prefix, dual, exact", &cache));
  if (cache) d.set_cache(*cache);
  std::optional<v1::Sampler> sampler;
  DLLM_RETURN_IF_ERROR(ReadEnum(body, "sampler", "SAMPLER_", v1::Sampler_Parse,
                                v1::SAMPLER_UNSPECIFIED, "masked, entropy_bound", &sampler));
  if (sampler) d.set_sampler(*sampler);
  v1::EntropyBoundParams& eb = *d.mutable_entropy_bound();
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "eb_max_steps", 1, 1 << 20, &i));
  if (i) eb.set_max_steps(static_cast<uint32_t>(*i)), i.reset();
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "eb_stability_threshold", 0, 1 << 20, &i));
  if (i) eb.set_stability_threshold(static_cast<uint32_t>(*i)), i.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "eb_t_min", 0, 1e6, &x));
  if (x) eb.set_t_min(static_cast<float>(*x)), x.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "eb_t_max", 0, 1e6, &x));
  if (x) eb.set_t_max(static_cast<float>(*x)), x.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "eb_entropy_bound", 0, 1e6, &x));
  if (x) eb.set_entropy_bound(static_cast<float>(*x)), x.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "eb_confidence_threshold", 0, 1e6, &x));
  if (x) eb.set_confidence_threshold(static_cast<float>(*x)), x.reset();
  // Unset stays unset: a masked request must not carry an empty message.
  if (eb.ByteSizeLong() == 0) d.clear_entropy_bound();
  v1::Llada2Params& l2 = *d.mutable_llada2();
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "steps_per_block", 1, 1 << 20, &i));
  if (i) l2.set_steps_per_block(static_cast<uint32_t>(*i)), i.reset();
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "max_post_steps", 0, 1 << 20, &i));
  if (i) l2.set_max_post_steps(static_cast<uint32_t>(*i)), i.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "editing_threshold", 0, 1, &x));
  if (x) l2.set_editing_threshold(static_cast<float>(*x)), x.reset();
  if (l2.ByteSizeLong() == 0) d.clear_llada2();
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "cache_refresh", 0, 1 << 20, &i));
  if (i) d.set_cache_refresh_steps(static_cast<uint32_t>(*i)), i.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "threshold", 0, 1, &x));
  if (x) d.set_threshold(static_cast<float>(*x)), x.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "eps", 0, 1, &x));
  if (x) d.set_eps(static_cast<float>(*x)), x.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "cfg_scale", 0, 1e6, &x));
  if (x) d.set_cfg_scale(static_cast<float>(*x)), x.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "temperature", 0, 2, &x));
  if (x) s.set_temperature(static_cast<float>(*x)), x.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "top_p", 0, 1, &x));
  // 1 is OpenAI's default and keeps every token: the same as no top-p,
  // which LLaDA's sampler (without one) accepts.
  if (x && *x < 1) s.set_top_p(static_cast<float>(*x));
  x.reset();
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "alg_temp", 0, 1e6, &x));
  if (x) s.set_alg_temp(static_cast<float>(*x)), x.reset();
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "top_k", 0, 1 << 30, &i));
  if (i) s.set_top_k(static_cast<uint32_t>(*i)), i.reset();
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "seed", 0, std::numeric_limits<int64_t>::max(), &i));
  if (i) s.set_seed(static_cast<uint64_t>(*i)), i.reset();
  return absl::OkStatus();
}

namespace {

// logprobs: completions take an integer (top alternatives, 0..5 in OpenAI;
// here up to kMaxTopCandidates), chat a boolean plus top_logprobs.
absl::Status ReadLogprobs(OpenAiEndpoint endpoint, const Json& body, OpenAiRequest* out) {
  std::optional<int64_t> top;
  if (endpoint == OpenAiEndpoint::kCompletions) {
    DLLM_RETURN_IF_ERROR(ReadInteger(body, "logprobs", 0, kMaxTopCandidates, &top));
    out->logprobs = top.has_value();
  } else {
    DLLM_RETURN_IF_ERROR(ReadBool(body, "logprobs", &out->logprobs));
    DLLM_RETURN_IF_ERROR(ReadInteger(body, "top_logprobs", 0, kMaxTopCandidates, &top));
    if (top && *top > 0 && !out->logprobs) return Invalid("top_logprobs", "needs logprobs: true");
  }
  out->top_logprobs = top ? static_cast<int>(*top) : 0;
  return absl::OkStatus();
}

}  // namespace

std::string ServedModelId(const Model& model, absl::string_view model_path) {
  if (!model.config().name.empty()) return model.config().name;
  return std::string(ModelFileStem(model_path));
}

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, const Json& body,
                                                 const Model& model, absl::string_view model_path) {
  DLLM_RETURN_IF_ERROR(CheckFields(endpoint, body));
  OpenAiRequest out;
  out.endpoint = endpoint;
  std::string name;
  DLLM_RETURN_IF_ERROR(ReadString(body, "model", &name));
  if (!NamesServedModel(name, model, model_path)) {
    return absl::NotFoundError(absl::StrCat("model: the model '", name,
                                            "' does not exist here (this server serves '",
                                            ServedModelId(model, model_path), "')"));
  }
  bool echo = false;
  DLLM_RETURN_IF_ERROR(ReadBool(body, "echo", &echo));
  if (echo) return Invalid("echo", "is not supported");
  v1::Prompt& prompt = *out.generate.mutable_prompt();
  DLLM_RETURN_IF_ERROR(endpoint == OpenAiEndpoint::kCompletions
                           ? ReadCompletionPrompt(body, &prompt)
                           : ReadChatPrompt(body, model, &prompt));
  DLLM_RETURN_IF_ERROR(ReadSettings(endpoint, body, &out));
  DLLM_RETURN_IF_ERROR(ReadStop(body, kMaxStopStrings, &out.stop));
  DLLM_RETURN_IF_ERROR(ReadBool(body, "stream", &out.stream));
  if (const Json* options = FindMember(body, "stream_options");
      options != nullptr && !options->is_null()) {
    if (!options->is_object()) return Invalid("stream_options", "must be an object");
    for (const auto& [key, value] : options->items()) {
      if (key != "include_usage") return Invalid("stream_options." + key, "unknown field");
    }
    if (!out.stream) return Invalid("stream_options", "only with stream: true");
    DLLM_RETURN_IF_ERROR(ReadBool(*options, "include_usage", &out.include_usage));
  }
  DLLM_RETURN_IF_ERROR(ReadString(body, "user", &out.user));
  DLLM_RETURN_IF_ERROR(ReadBool(body, "dllm_canvas", &out.canvas));
  if (out.canvas && !out.stream) return Invalid("dllm_canvas", "only with stream: true");
  DLLM_RETURN_IF_ERROR(ReadLogprobs(endpoint, body, &out));

  // What the stream carries: text deltas, plus the committed tokens for
  // logprobs and the whole canvas for dllm_canvas.
  v1::StreamOptions& stream = *out.generate.mutable_stream();
  stream.set_detail(out.canvas     ? v1::DETAIL_CANVAS
                    : out.logprobs ? v1::DETAIL_STEPS
                                   : v1::DETAIL_TEXT);
  stream.set_include_logprobs(out.logprobs);
  stream.set_top_candidates(static_cast<uint32_t>(out.top_logprobs));
  return out;
}

}  // namespace dllm
