#include "service/http/infill_request.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/base/status_macros.h"
#include "engine/sampler/sampler_config.h"
#include "service/http/openai_request.h"

namespace dllm {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// What /infill does with each field llama-server reads.
enum class Use {
  kRead,      // parsed below
  kSettings,  // ReadGenerationSettings (diffusion extras and sampling)
  kNoEffect,  // accepted: it cannot change the text here (warned about)
};
struct Field {
  const char* name;
  Use use;
};
constexpr Field kFields[] = {
    {"input_prefix", Use::kRead},
    {"input_suffix", Use::kRead},
    {"input_extra", Use::kRead},
    {"prompt", Use::kRead},
    {"n_predict", Use::kRead},
    {"max_tokens", Use::kRead},
    {"max_completion_tokens", Use::kRead},
    {"n_indent", Use::kRead},
    {"t_max_predict_ms", Use::kRead},
    {"n_cmpl", Use::kRead},
    {"n", Use::kRead},
    {"id_slot", Use::kRead},
    {"stream", Use::kRead},
    {"stop", Use::kRead},
    {"response_fields", Use::kRead},
    {"samplers", Use::kRead},
    {"seed", Use::kRead},
    {"temperature", Use::kSettings},
    {"top_k", Use::kSettings},
    {"top_p", Use::kSettings},
    {"steps", Use::kSettings},
    {"block_length", Use::kSettings},
    {"algorithm", Use::kSettings},
    {"threshold", Use::kSettings},
    {"alg_temp", Use::kSettings},
    {"cfg_scale", Use::kSettings},
    {"eps", Use::kSettings},
    {"cache", Use::kSettings},
    {"cache_refresh", Use::kSettings},
    {"cache_prompt", Use::kRead},
    // Slot choice, a time limit llama-server itself does not apply, and
    // (single-model server) the model name.
    {"t_max_prompt_ms", Use::kNoEffect},
    {"model", Use::kNoEffect},
};

// llama-server's token samplers and options that have no counterpart in the
// official diffusion samplers: refused unless absent, null or neutral.
constexpr NeutralField kNeutralNumbers[] = {
    {"min_p", 0},
    {"typical_p", 1},
    {"repeat_penalty", 1},
    {"presence_penalty", 0},
    {"frequency_penalty", 0},
    {"dry_multiplier", 0},
    {"xtc_probability", 0},
    {"mirostat", 0},
    {"dynatemp_range", 0},
    {"n_probs", 0},
    {"top_n_sigma", -1},
};
// Refused unless absent, null, false or empty.
constexpr const char* kNeutralEmpty[] = {"grammar", "json_schema", "lora", "logit_bias",
                                         "ignore_eos"};

bool IsEmptyValue(const Json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_string() && v.empty()) ||
         (v.is_array() && v.empty()) || (v.is_object() && v.empty());
}

// Sorts the body's fields into read / settings / no effect / refused /
// ignored (llama-server ignores what it does not know).
absl::Status CheckFields(const Json& body, InfillRequest* out) {
  if (!body.is_object()) return Invalid("body", "must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    const Field* known = nullptr;
    for (const Field& f : kFields) {
      if (key == f.name) known = &f;
    }
    if (known != nullptr) {
      if (known->use == Use::kNoEffect) out->ignored.push_back(key);
      continue;
    }
    bool handled = false;
    DLLM_RETURN_IF_ERROR(CheckNeutral(kNeutralNumbers, key, value,
                                      " (the diffusion samplers have no such option)", &handled));
    for (const char* name : kNeutralEmpty) {
      if (key != name) continue;
      handled = true;
      if (!IsEmptyValue(value)) return Invalid(key, "is not supported");
    }
    if (!handled) out->ignored.push_back(key);
  }
  return absl::OkStatus();
}

// Which end of a text the context trim keeps: the prefix and the extra
// context keep their ends (nearest the cursor, newest), the suffix its start.
enum class Keep { kStart, kEnd };

// What of the texts of one canvas part, `budget` bytes in all, is worth
// tokenizing: the trim keeps at most n_ctx tokens of it, and no token covers
// more than max_token_bytes bytes, so text beyond twice that (the second
// half for the pre-token that straddles the cut) is trimmed whatever it
// encodes to. Cutting first bounds the tokenizer's work by the context, not
// by the body (issue #34 R5). The cut falls on a UTF-8 character boundary;
// `*dropped` counts the bytes cut.
class ByteBudget {
 public:
  ByteBudget(const Model& model, Keep keep)
      : left_(2 * static_cast<size_t>(model.config().n_ctx_train) *
              model.tokenizer().max_token_bytes()),
        keep_(keep) {}
  // The part of `text` kept, after the texts taken before it (nearer the
  // kept end); empty once the budget is spent.
  absl::string_view Take(absl::string_view text, int64_t* dropped) {
    size_t n = std::min(text.size(), left_);
    if (n < text.size()) {
      // Onto a character boundary: never start or end inside one.
      const auto continuation = [&](size_t at) {
        return at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80;
      };
      if (keep_ == Keep::kEnd) {
        while (n > 0 && continuation(text.size() - n)) --n;
      } else {
        while (n > 0 && continuation(n)) --n;
      }
    }
    *dropped += static_cast<int64_t>(text.size() - n);
    left_ -= n;
    return keep_ == Keep::kEnd ? text.substr(text.size() - n) : text.substr(0, n);
  }
  bool spent() const { return left_ == 0; }
  // Spends the budget on one token id (it stands for at most this many bytes).
  void TakeToken(const Model& model) {
    left_ -= std::min(left_, model.tokenizer().max_token_bytes());
  }

 private:
  size_t left_;
  const Keep keep_;
};

// input_prefix / input_suffix as llama-server's tokenize_mixed takes them: a
// string, or an array of strings and token ids. Special-token texts stay
// text. Text beyond what the trim could keep (ByteBudget, from the `keep`
// end) is cut before tokenizing; `*dropped` counts its bytes.
absl::StatusOr<std::vector<int32_t>> MixedTokens(const Json& body, const char* field,
                                                 const Model& model, Keep keep, int64_t* dropped) {
  const Json* v = FindMember(body, field);
  if (v == nullptr || v->is_null()) return Invalid(field, "is required");
  const ModelConfig& c = model.config();
  ByteBudget budget(model, keep);
  if (v->is_string()) {
    return model.tokenizer().Encode(budget.Take(v->get_ref<const std::string&>(), dropped), false,
                                    false);
  }
  if (!v->is_array())
    return Invalid(field, "must be a string or an array of strings and token ids");
  // Each part's tokens, taken from the kept end; in order at the end.
  std::vector<std::vector<int32_t>> parts(v->size());
  for (size_t k = 0; k < v->size(); ++k) {
    const size_t i = keep == Keep::kEnd ? v->size() - 1 - k : k;
    const Json& part = (*v)[i];
    if (part.is_string()) {
      parts[i] = model.tokenizer().Encode(budget.Take(part.get_ref<const std::string&>(), dropped),
                                          false, false);
    } else if (part.is_number_integer() &&
               NotAGivenToken(part.get<int64_t>(), c.n_vocab, c.tokens.mask).empty()) {
      parts[i].push_back(static_cast<int32_t>(part.get<int64_t>()));
      budget.TakeToken(model);
    } else {
      return Invalid(absl::StrCat(field, "[", i, "]"),
                     absl::StrCat("must be a string or a token id below ", c.n_vocab,
                                  " that is not the mask"));
    }
  }
  std::vector<int32_t> out;
  for (const std::vector<int32_t>& ids : parts) out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

// input_extra as one token stream, llama-server's repo-level layout: with
// the vocabulary's file-separator token, [<|repo_name|>]myproject\n then
// <|file_sep|>filename\ntext per chunk and <|file_sep|>filename\n for the
// file being edited; without it, "\n\n--- snippet ---\n\n" before each text.
// Chunks older than what the trim could keep (ByteBudget) are cut before
// tokenizing; `*dropped` counts their bytes.
absl::StatusOr<std::vector<int32_t>> ExtraTokens(const Json& body, const Model& model,
                                                 int64_t* dropped) {
  const Json* v = FindMember(body, "input_extra");
  if (v == nullptr || v->is_null()) return std::vector<int32_t>();
  if (!v->is_array()) {
    return Invalid("input_extra", "must be an array of {\"filename\": string, \"text\": string}");
  }
  std::vector<int32_t> out;
  if (v->empty()) return out;
  const BpeTokenizer& tok = model.tokenizer();
  const auto append = [&](absl::string_view text) {
    const std::vector<int32_t> ids = tok.Encode(text, false, false);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  int32_t repo = tok.FindToken("<|repo_name|>");
  if (repo < 0) repo = tok.FindToken("<|fim_repo|>");
  const int32_t sep = tok.FindToken("<|file_sep|>");
  if (repo >= 0 && sep >= 0) {
    out.push_back(repo);
    append("myproject\n");
  }
  // Every chunk is checked; the texts are budgeted newest first.
  std::vector<std::pair<std::string, absl::string_view>> chunks(v->size());  // name, text
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& chunk = (*v)[i];
    const std::string where = absl::StrCat("input_extra[", i, "]");
    if (!chunk.is_object()) return Invalid(where, "must be an object {\"filename\", \"text\"}");
    const Json* text = FindMember(chunk, "text");
    if (text == nullptr || !text->is_string()) return Invalid(where + ".text", "must be a string");
    std::string filename = "tmp";
    if (const Json* name = FindMember(chunk, "filename"); name != nullptr && !name->is_null()) {
      if (!name->is_string()) return Invalid(where + ".filename", "must be a string");
      filename = name->get<std::string>();
    }
    chunks[i] = {std::move(filename), text->get_ref<const std::string&>()};
  }
  ByteBudget budget(model, Keep::kEnd);
  size_t first = 0;  // the oldest chunk kept
  for (size_t i = chunks.size(); i-- > 0;) {
    if (budget.spent()) {
      first = i + 1;
      break;
    }
    chunks[i].second = budget.Take(chunks[i].second, dropped);
  }
  for (size_t i = 0; i < first; ++i) *dropped += static_cast<int64_t>(chunks[i].second.size());
  for (size_t i = first; i < chunks.size(); ++i) {
    if (sep >= 0) {
      out.push_back(sep);
      append(chunks[i].first + "\n");
    } else {
      append("\n\n--- snippet ---\n\n");
    }
    append(chunks[i].second);
  }
  if (sep >= 0) {
    out.push_back(sep);
    append("filename\n");
  }
  return out;
}

// The span (n_predict, or llama-server's aliases max_tokens and
// max_completion_tokens; -1, llama-server's "until done", is dllm's default
// length) and the request's own settings: n_indent, the time limit, how
// many completions, the slot, streaming, stop strings, response_fields and
// the samplers as sent.
absl::Status ReadInfillOptions(const Json& body, const ModelConfig& c, InfillRequest* out) {
  const int64_t n_ctx = c.n_ctx_train;
  const char* span_field = "n_predict";
  for (const char* alias : {"max_tokens", "max_completion_tokens"}) {
    if (FindMember(body, span_field) == nullptr && FindMember(body, alias) != nullptr) {
      span_field = alias;
    }
  }
  std::optional<int64_t> i;
  DLLM_RETURN_IF_ERROR(ReadInteger(body, span_field, -1, 1 << 30, &i));
  int64_t span = i.value_or(-1);
  if (span == -1) span = std::min<int64_t>(kDefaultGenLength, n_ctx / 2);
  if (span > n_ctx - 1) {
    return Invalid(span_field, absl::StrCat(span, " exceeds the limit of ", n_ctx - 1,
                                            " (the model's context less one prompt token)"));
  }
  out->n_predict = static_cast<int>(span);
  out->warm_up = span == 0;
  const auto read_int = [&](const char* field, int64_t lo, int64_t hi, int fallback, int* to) {
    std::optional<int64_t> v;
    DLLM_RETURN_IF_ERROR(ReadInteger(body, field, lo, hi, &v));
    *to = static_cast<int>(v.value_or(fallback));
    return absl::OkStatus();
  };
  DLLM_RETURN_IF_ERROR(read_int("n_indent", 0, 1 << 20, 0, &out->n_indent));
  DLLM_RETURN_IF_ERROR(read_int("t_max_predict_ms", -1, 1 << 30, 0, &out->t_max_predict_ms));
  const char* n_field = FindMember(body, "n_cmpl") != nullptr ? "n_cmpl" : "n";
  DLLM_RETURN_IF_ERROR(read_int(n_field, 1, kMaxInfillCompletions, 1, &out->n_cmpl));
  DLLM_RETURN_IF_ERROR(read_int("id_slot", -1, 1 << 20, -1, &out->id_slot));
  DLLM_RETURN_IF_ERROR(ReadBool(body, "stream", &out->stream));
  if (out->stream && out->n_cmpl > 1) {
    return Invalid(n_field, "more than one completion only without stream");
  }
  DLLM_RETURN_IF_ERROR(ReadStop(body, kMaxInfillStopStrings, &out->stop));
  if (const Json* fields = FindMember(body, "response_fields");
      fields != nullptr && fields->is_array() &&
      std::all_of(fields->begin(), fields->end(), [](const Json& f) { return f.is_string(); })) {
    // As llama-server: any other shape means the whole response.
    for (const Json& f : *fields) out->response_fields.push_back(f.get<std::string>());
    out->select_fields = true;
  }
  if (const Json* samplers = FindMember(body, "samplers"); samplers != nullptr) {
    if (samplers->is_array()) {
      for (const Json& s : *samplers) {
        if (s.is_string()) out->samplers.push_back(s.get<std::string>());
      }
    }
    out->ignored.push_back("samplers");
  }
  return absl::OkStatus();
}

// The sampling and diffusion settings, with /infill's defaults: the span as
// gen_length, the dual cache for cache_prompt, small blocks from the left.
absl::Status ReadInfillSettings(const Json& body, const ModelConfig& c, InfillRequest* out) {
  // llama-server's seed -1 is "any seed".
  Json settings = body;
  if (const Json* seed = FindMember(body, "seed");
      seed != nullptr && seed->is_number_integer() && seed->get<int64_t>() == -1) {
    settings.erase("seed");
  }
  DLLM_RETURN_IF_ERROR(ReadGenerationSettings(settings, &out->generate));
  GenerationRequest::Sampling& sampling = out->generate.sampling;
  if (SamplerFamilyOf(c.arch) == SamplerFamily::kLlada) {
    // The plugins always send top_k and top_p; LLaDA's official sampler has
    // neither, and takes its candidates from its own rule.
    if (sampling.top_k != 0) out->ignored.push_back("top_k");
    if (sampling.top_p != 0) out->ignored.push_back("top_p");
    sampling.top_k = 0;
    sampling.top_p = 0;
  }
  GenerationRequest::Diffusion& diffusion = out->generate.diffusion;
  diffusion.gen_length = static_cast<uint32_t>(std::max(out->n_predict, 1));
  // cache_prompt: llama-server's "reuse what was computed for this text";
  // here the opt-in dual cache (the keys and values of the prefix and the
  // suffix reused, the span's current block computed), unless `cache` says
  // otherwise. Absent or false: exact decoding.
  bool cache_prompt = false;
  DLLM_RETURN_IF_ERROR(ReadBool(body, "cache_prompt", &cache_prompt));
  if (cache_prompt && FindMember(body, "cache") == nullptr) diffusion.cache = CacheMode::kDual;
  // Small blocks from the left, so that a time budget finds committed text
  // at the span's front; a block_length in the body wins.
  if (FindMember(body, "block_length") == nullptr) {
    const int gen = static_cast<int>(diffusion.gen_length);
    diffusion.block_length = static_cast<uint32_t>(
        InfillBlockLength(gen, diffusion.steps != 0 ? static_cast<int>(diffusion.steps) : gen));
  }
  return absl::OkStatus();
}

// The canvas's parts before they are fitted to the context.
struct InfillParts {
  std::vector<int32_t> prompt;  // the cursor's line
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
  std::vector<int32_t> extra;
};

absl::StatusOr<InfillParts> ReadInfillParts(const Json& body, const Model& model,
                                            InfillTrim* trimmed) {
  const int64_t n_ctx = model.config().n_ctx_train;
  const Json* prompt_json = FindMember(body, "prompt");
  std::string prompt_text;
  if (prompt_json != nullptr && !prompt_json->is_null()) {
    if (!prompt_json->is_string()) return Invalid("prompt", "must be a string");
    prompt_text = prompt_json->get<std::string>();
  }
  // As for /v1/completions: a prompt (kept whole) of more bytes than the
  // context could hold in its longest tokens cannot fit.
  const size_t max_prompt_bytes = static_cast<size_t>(n_ctx) * model.tokenizer().max_token_bytes();
  if (prompt_text.size() > max_prompt_bytes) {
    return absl::OutOfRangeError(absl::StrCat(
        "prompt: ", prompt_text.size(), " bytes cannot fit the model's context of ", n_ctx,
        " tokens (no token covers more than ", model.tokenizer().max_token_bytes(), " bytes)"));
  }
  InfillParts parts;
  DLLM_ASSIGN_OR_RETURN(
      parts.prefix, MixedTokens(body, "input_prefix", model, Keep::kEnd, &trimmed->prefix_bytes));
  DLLM_ASSIGN_OR_RETURN(
      parts.suffix, MixedTokens(body, "input_suffix", model, Keep::kStart, &trimmed->suffix_bytes));
  DLLM_ASSIGN_OR_RETURN(parts.extra, ExtraTokens(body, model, &trimmed->extra_bytes));
  // llama-server parses special-token texts in `prompt` (not in the prefix).
  parts.prompt = model.tokenizer().Encode(prompt_text, false, true);
  const int32_t mask = model.config().tokens.mask;
  if (std::find(parts.prompt.begin(), parts.prompt.end(), mask) != parts.prompt.end()) {
    return Invalid("prompt", "contains the mask token's text; a prompt cannot hold masks");
  }
  return parts;
}

// What fits: the span first, then BOS and the prompt (the cursor's line),
// then the prefix and the suffix (the prefix keeps at least three quarters
// of the room when both need more), then the extra context. The canvas's
// token ids go into out->generate.prompt.
absl::Status FitInfillCanvas(const InfillParts& parts, const ModelConfig& c, InfillRequest* out) {
  const int64_t n_ctx = c.n_ctx_train;
  const int64_t span = out->n_predict;
  const bool bos = c.tokens.add_bos && c.tokens.bos >= 0;
  const int64_t room = n_ctx - span - (bos ? 1 : 0) - static_cast<int64_t>(parts.prompt.size());
  if (room < 0) {
    return absl::OutOfRangeError(absl::StrCat("prompt: ", parts.prompt.size(),
                                              " tokens and a span of ", span,
                                              " exceed the model's context of ", n_ctx));
  }
  const int64_t n_prefix = static_cast<int64_t>(parts.prefix.size());
  const int64_t n_suffix = static_cast<int64_t>(parts.suffix.size());
  const int64_t n_extra = static_cast<int64_t>(parts.extra.size());
  int64_t prefix_take = std::min(n_prefix, std::max(room * 3 / 4, room - n_suffix));
  // The span needs a token before it: with nothing else there (no BOS, no
  // prompt), the prefix keeps its last token even when its share rounds to
  // none (issue #34 R9: a span filling all but one position of the context
  // gave the last one to the suffix, then called the prefix empty).
  if (!bos && parts.prompt.empty() && room > 0)
    prefix_take = std::max(prefix_take, std::min<int64_t>(n_prefix, 1));
  const int64_t suffix_take = std::min(n_suffix, room - prefix_take);
  const int64_t extra_take = std::min(n_extra, room - prefix_take - suffix_take);
  out->trimmed.prefix = static_cast<int>(n_prefix - prefix_take);
  out->trimmed.suffix = static_cast<int>(n_suffix - suffix_take);
  out->trimmed.extra = static_cast<int>(n_extra - extra_take);

  GenerationRequest::Prompt& prompt = out->generate.prompt;
  prompt.input = PromptInput::kTokenIds;
  std::vector<uint32_t>& ids = prompt.token_ids;
  ids.insert(ids.end(), parts.extra.end() - extra_take, parts.extra.end());
  if (bos) ids.push_back(static_cast<uint32_t>(c.tokens.bos));
  ids.insert(ids.end(), parts.prefix.end() - prefix_take, parts.prefix.end());
  ids.insert(ids.end(), parts.prompt.begin(), parts.prompt.end());
  if (suffix_take > 0) {
    prompt.suffix_input = PromptInput::kTokenIds;
    prompt.suffix_token_ids.assign(parts.suffix.begin(), parts.suffix.begin() + suffix_take);
  }
  if (ids.empty() && !out->warm_up) {
    if (n_prefix > 0) {
      // Not empty: trimmed away (issue #34 R9).
      return absl::OutOfRangeError(absl::StrCat(
          "input_prefix: none of its ", n_prefix, " tokens fit beside a span of ", span,
          " in the model's context of ", n_ctx, "; the span needs a token before it"));
    }
    return Invalid("input_prefix", "empty, as is prompt: the span needs a token before it");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InfillRequest> ParseInfillRequest(const Json& body, const Model& model) {
  InfillRequest out;
  DLLM_RETURN_IF_ERROR(CheckFields(body, &out));
  DLLM_RETURN_IF_ERROR(ReadInfillOptions(body, model.config(), &out));
  DLLM_RETURN_IF_ERROR(ReadInfillSettings(body, model.config(), &out));
  DLLM_ASSIGN_OR_RETURN(const InfillParts parts, ReadInfillParts(body, model, &out.trimmed));
  DLLM_RETURN_IF_ERROR(FitInfillCanvas(parts, model.config(), &out));
  // One StepEvent a step with its timings: the time budget is checked
  // after every step, and prompt_ms is the first step's forward.
  out.generate.stream.detail = v1::DETAIL_STEPS;
  out.generate.stream.include_timings = true;
  return out;
}

Json SelectResponseFields(const Json& whole, const std::vector<std::string>& paths) {
  Json out = Json::object();
  for (const std::string& path : paths) {
    const Json* at = &whole;
    for (absl::string_view key : absl::StrSplit(path, '/')) {
      at = FindMember(*at, key);
      if (at == nullptr) break;
    }
    if (at != nullptr) out[path] = *at;
  }
  return out;
}

}  // namespace dllm
