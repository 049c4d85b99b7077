#include "service/http/openai_request.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "engine/sampler/sampler_config.h"
#include "engine/tokenizer/chat_template.h"
#include "service/engine/request_validation.h"

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
absl::Status ReadCompletionPrompt(const Json& body, GenerationRequest::Prompt* prompt) {
  std::string suffix;
  DLLM_RETURN_IF_ERROR(ReadString(body, "suffix", &suffix));
  if (!suffix.empty()) {
    prompt->suffix_input = PromptInput::kText;
    prompt->suffix_text = std::move(suffix);
  }
  const Json* v = FindMember(body, "prompt");
  if (v == nullptr || v->is_null()) return Invalid("prompt", "is required");
  if (v->is_string()) {
    prompt->input = PromptInput::kText;
    prompt->text = v->get<std::string>();
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
    prompt->token_ids.push_back(static_cast<uint32_t>(id.get<uint64_t>()));
  }
  prompt->input = PromptInput::kTokenIds;
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
absl::Status ReadChatPrompt(const Json& body, const Model& model,
                            GenerationRequest::Prompt* prompt) {
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
  prompt->input = PromptInput::kTokenIds;
  for (int32_t id : EncodeChat(model.tokenizer(), model.chat_template(), turns)) {
    prompt->token_ids.push_back(static_cast<uint32_t>(id));
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
  std::optional<int64_t> i;
  const char* max_tokens = "max_tokens";
  if (endpoint == OpenAiEndpoint::kChatCompletions && FindMember(body, "max_completion_tokens")) {
    max_tokens = "max_completion_tokens";
  }
  DLLM_RETURN_IF_ERROR(ReadInteger(body, max_tokens, 1, 1 << 20, &i));
  if (i) out->generate.diffusion.gen_length = static_cast<uint32_t>(*i);
  return ReadGenerationSettings(body, &out->generate);
}

}  // namespace

namespace {

// The algorithm, cache and sampler, by their API names.
absl::Status ReadSettingNames(const Json& body, GenerationRequest::Diffusion* d) {
  std::optional<v1::Algorithm> algorithm;
  DLLM_RETURN_IF_ERROR(
      ReadEnum(body, "algorithm", "ALGORITHM_", v1::Algorithm_Parse, v1::ALGORITHM_UNSPECIFIED,
               "low_confidence, random, origin, maskgit_plus, topk_margin, entropy", &algorithm));
  if (algorithm) d->algorithm = AlgorithmFromProto(*algorithm);
  std::optional<v1::Cache> cache;
  DLLM_RETURN_IF_ERROR(ReadEnum(body, "cache", "CACHE_", v1::Cache_Parse, v1::CACHE_UNSPECIFIED,
                                "none, prefix, dual, exact", &cache));
  if (cache) d->cache = CacheModeFromProto(*cache);
  std::optional<v1::Sampler> sampler;
  DLLM_RETURN_IF_ERROR(ReadEnum(body, "sampler", "SAMPLER_", v1::Sampler_Parse,
                                v1::SAMPLER_UNSPECIFIED, "masked, entropy_bound", &sampler));
  if (sampler) d->sampler = SamplerChoiceFromProto(*sampler);
  return absl::OkStatus();
}

// A field read into `*to` when present, within [lo, hi]: an integer field
// when the bounds are integers (into a count), else a number (into a float).
template <typename Bound, typename T>
absl::Status ReadInto(const Json& body, const char* field, Bound lo, Bound hi, T* to) {
  if constexpr (std::is_integral_v<Bound>) {
    std::optional<int64_t> v;
    DLLM_RETURN_IF_ERROR(ReadInteger(body, field, lo, hi, &v));
    if (v) *to = static_cast<uint32_t>(*v);
  } else {
    std::optional<double> v;
    DLLM_RETURN_IF_ERROR(ReadNumber(body, field, lo, hi, &v));
    if (v) *to = static_cast<float>(*v);
  }
  return absl::OkStatus();
}

// DiffusionGemma's eb_* fields; unset stays unset (a masked request must
// not carry the entropy-bound settings).
absl::Status ReadEntropyBound(const Json& body, GenerationRequest::Diffusion* d) {
  GenerationRequest::EntropyBound eb;
  DLLM_RETURN_IF_ERROR(ReadInto(body, "eb_max_steps", 1, 1 << 20, &eb.max_steps));
  DLLM_RETURN_IF_ERROR(
      ReadInto(body, "eb_stability_threshold", 0, 1 << 20, &eb.stability_threshold));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "eb_t_min", 0.0, 1e6, &eb.t_min));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "eb_t_max", 0.0, 1e6, &eb.t_max));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "eb_entropy_bound", 0.0, 1e6, &eb.entropy_bound));
  DLLM_RETURN_IF_ERROR(
      ReadInto(body, "eb_confidence_threshold", 0.0, 1e6, &eb.confidence_threshold));
  if (eb.any()) d->entropy_bound = eb;
  return absl::OkStatus();
}

// LLaDA2's fields; unset stays unset.
absl::Status ReadLlada2(const Json& body, GenerationRequest::Diffusion* d) {
  GenerationRequest::Llada2 l2;
  std::optional<uint32_t> steps_per_block;
  DLLM_RETURN_IF_ERROR(ReadInto(body, "steps_per_block", 1, 1 << 20, &steps_per_block));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "max_post_steps", 0, 1 << 20, &l2.max_post_steps));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "editing_threshold", 0.0, 1.0, &l2.editing_threshold));
  l2.steps_per_block = steps_per_block.value_or(0);
  if (steps_per_block || l2.max_post_steps || l2.editing_threshold) d->llada2 = l2;
  return absl::OkStatus();
}

absl::Status ReadSampling(const Json& body, GenerationRequest::Sampling* s) {
  DLLM_RETURN_IF_ERROR(ReadInto(body, "temperature", 0.0, 2.0, &s->temperature));
  std::optional<double> top_p;
  DLLM_RETURN_IF_ERROR(ReadNumber(body, "top_p", 0, 1, &top_p));
  // 1 is OpenAI's default and keeps every token: the same as no top-p,
  // which LLaDA's sampler (without one) accepts.
  if (top_p && *top_p < 1) s->top_p = static_cast<float>(*top_p);
  DLLM_RETURN_IF_ERROR(ReadInto(body, "alg_temp", 0.0, 1e6, &s->alg_temp));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "top_k", 0, 1 << 30, &s->top_k));
  std::optional<int64_t> seed;
  DLLM_RETURN_IF_ERROR(ReadInteger(body, "seed", 0, std::numeric_limits<int64_t>::max(), &seed));
  if (seed) s->seed = static_cast<uint64_t>(*seed);
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadGenerationSettings(const Json& body, GenerationRequest* generate) {
  GenerationRequest::Diffusion& d = generate->diffusion;
  DLLM_RETURN_IF_ERROR(ReadInto(body, "steps", 1, 1 << 20, &d.steps));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "block_length", 1, 1 << 20, &d.block_length));
  DLLM_RETURN_IF_ERROR(ReadSettingNames(body, &d));
  DLLM_RETURN_IF_ERROR(ReadEntropyBound(body, &d));
  DLLM_RETURN_IF_ERROR(ReadLlada2(body, &d));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "cache_refresh", 0, 1 << 20, &d.cache_refresh_steps));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "threshold", 0.0, 1.0, &d.threshold));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "eps", 0.0, 1.0, &d.eps));
  DLLM_RETURN_IF_ERROR(ReadInto(body, "cfg_scale", 0.0, 1e6, &d.cfg_scale));
  return ReadSampling(body, &generate->sampling);
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
  GenerationRequest::Prompt& prompt = out.generate.prompt;
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
  GenerationRequest::Stream& stream = out.generate.stream;
  stream.detail = out.canvas     ? v1::DETAIL_CANVAS
                  : out.logprobs ? v1::DETAIL_STEPS
                                 : v1::DETAIL_TEXT;
  stream.include_logprobs = out.logprobs;
  stream.top_candidates = static_cast<uint32_t>(out.top_logprobs);
  return out;
}

}  // namespace dllm
