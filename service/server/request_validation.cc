#include "service/server/request_validation.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "engine/base/status_macros.h"
#include "engine/base/utf8.h"
#include "engine/tokenizer/chat_template.h"

namespace dllm {
namespace {

// The proto's Cache values are CacheMode's, one up.
static_assert(v1::CACHE_PREFIX - v1::CACHE_NONE == static_cast<int>(CacheMode::kPrefix));
static_assert(v1::CACHE_DUAL - v1::CACHE_NONE == static_cast<int>(CacheMode::kDual));
static_assert(v1::CACHE_EXACT - v1::CACHE_NONE == static_cast<int>(CacheMode::kExact));

}  // namespace

CacheMode CacheModeFromProto(v1::Cache cache) {
  return cache == v1::CACHE_UNSPECIFIED ? CacheMode::kNone
                                        : static_cast<CacheMode>(cache - v1::CACHE_NONE);
}

namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// SamplerConfig::Validate() names its fields "sampler: FIELD: ..."; the
// client knows them by their proto path.
absl::Status RenameSamplerField(const absl::Status& s) {
  static constexpr std::pair<absl::string_view, absl::string_view> kFields[] = {
      {"gen_length", "diffusion.gen_length"},
      {"steps", "diffusion.steps"},
      {"block_length", "diffusion.block_length"},
      {"algorithm", "diffusion.algorithm"},
      {"threshold", "diffusion.threshold"},
      {"cache_refresh_steps", "diffusion.cache_refresh_steps"},
      {"cache", "diffusion.cache"},
      {"eps", "diffusion.eps"},
      {"cfg_scale", "diffusion.cfg_scale"},
      {"logits_eos_inf", "diffusion.logits_eos_inf"},
      {"confidence_eos_eot_inf", "diffusion.confidence_eos_eot_inf"},
      {"temperature", "sampling.temperature"},
      {"top_p", "sampling.top_p"},
      {"top_k", "sampling.top_k"},
      {"alg_temp", "sampling.alg_temp"},
      {"steps_per_block", "diffusion.llada2.steps_per_block"},
      {"editing_threshold", "diffusion.llada2.editing_threshold"},
      {"max_post_steps", "diffusion.llada2.max_post_steps"},
  };
  absl::string_view message = s.message();
  if (absl::ConsumePrefix(&message, "sampler: ")) {
    for (const auto& [name, path] : kFields) {
      absl::string_view rest = message;
      if (absl::ConsumePrefix(&rest, name) && absl::ConsumePrefix(&rest, ": ")) {
        return absl::Status(s.code(), absl::StrCat(path, ": ", rest));
      }
    }
  }
  return absl::Status(s.code(), absl::StrCat("diffusion: ", message));
}

std::mt19937_64& Random() {
  static std::mt19937_64 rng(std::random_device{}());
  return rng;
}
std::mutex random_mutex;

absl::Status ValidateRequestId(absl::string_view id, absl::string_view field) {
  if (id.size() > kMaxRequestIdBytes) {
    return Invalid(field,
                   absl::StrCat(id.size(), " bytes exceed the limit of ", kMaxRequestIdBytes));
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (c < 0x21 || c > 0x7e) {
      return Invalid(field, absl::StrCat("byte ", i, " is not printable ASCII"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateModelField(absl::string_view name, const Model& model, absl::string_view path,
                                absl::string_view field) {
  if (NamesServedModel(name, model, path)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": model '", name,
                                                 "' is not served here (this server serves '",
                                                 model.config().name, "')"));
}

// Token ids a client puts on the canvas as they are: each in the
// vocabulary and not the mask; errors name `field`.ids[i].
absl::StatusOr<std::vector<int32_t>> CanvasIds(const v1::TokenIds& ids, absl::string_view field,
                                               const ModelConfig& c) {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(ids.ids_size()));
  for (int i = 0; i < ids.ids_size(); ++i) {
    const uint32_t id = ids.ids(i);
    if (id >= static_cast<uint64_t>(c.n_vocab)) {
      return Invalid(absl::StrCat(field, ".ids[", i, "]"),
                     absl::StrCat(id, " is outside the vocabulary of ", c.n_vocab));
    }
    if (static_cast<int32_t>(id) == c.tokens.mask) {
      return Invalid(absl::StrCat(field, ".ids[", i, "]"), absl::StrCat(id, " is the mask token"));
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

absl::StatusOr<GenerationSpec> ValidateCommon(absl::string_view request_id,
                                              absl::string_view model_name,
                                              const v1::Prompt& prompt,
                                              const v1::DiffusionParams& diffusion,
                                              const v1::SamplingParams& sampling,
                                              const Model& model, absl::string_view model_path) {
  GenerationSpec spec;
  if (absl::Status s = ValidateRequestId(request_id, "request_id"); !s.ok()) return s;
  spec.request_id = request_id.empty() ? NewRequestId() : std::string(request_id);
  if (absl::Status s = ValidateModelField(model_name, model, model_path, "model"); !s.ok())
    return s;
  absl::StatusOr<std::vector<int32_t>> ids = ValidatePrompt(prompt, model);
  if (!ids.ok()) return ids.status();
  spec.prompt = std::move(*ids);
  DLLM_ASSIGN_OR_RETURN(spec.suffix, ValidateSuffix(prompt, model));
  const int64_t n_ctx = model.config().n_ctx_train;
  DLLM_ASSIGN_OR_RETURN(const bool entropy_bound, UsesEntropyBound(diffusion, model.config()));
  if (entropy_bound) {
    if (!spec.suffix.empty()) {
      return Invalid("prompt.suffix",
                     "the entropy-bound sampler writes after the prompt only; it cannot fill a "
                     "span before a suffix");
    }
    DLLM_ASSIGN_OR_RETURN(spec.entropy_bound,
                          EntropyBoundFromProto(diffusion, sampling, model, &spec.caching));
    const int canvas = spec.entropy_bound->config.canvas_length;
    spec.sampler.gen_length = spec.entropy_bound->max_tokens;
    if (const int64_t end = static_cast<int64_t>(spec.prompt.size()) + canvas; end > n_ctx) {
      return Invalid("prompt",
                     absl::StrCat("prompt of ", spec.prompt.size(), " tokens and a canvas of ",
                                  canvas, " exceed the model's context of ", n_ctx));
    }
    if (sampling.has_seed() && sampling.seed() > 0xFFFFFFFFu) {
      return Invalid("sampling.seed",
                     absl::StrCat(sampling.seed(),
                                  " exceeds the entropy-bound sampler's 32-bit seed (at most ",
                                  0xFFFFFFFFu, ")"));
    }
    spec.seed_was_set = sampling.has_seed();
    spec.sampler.seed = sampling.has_seed() ? sampling.seed() : NewSeed() & 0xFFFFFFFFu;
    spec.entropy_bound->config.seed = static_cast<uint32_t>(spec.sampler.seed);
    return spec;
  }
  if (diffusion.has_entropy_bound()) {
    return Invalid("diffusion.entropy_bound", "applies to the entropy-bound sampler only");
  }
  const bool block_causal = model.config().block_length > 0;
  if (diffusion.cache() == v1::CACHE_EXACT && !block_causal) {
    return Invalid("diffusion.cache",
                   "CACHE_EXACT is the cache of the entropy-bound sampler and of block-diffusion "
                   "models; a masked sampler's every row reads the whole canvas (CACHE_PREFIX "
                   "and CACHE_DUAL approximate)");
  }
  if (block_causal &&
      (diffusion.cache() == v1::CACHE_PREFIX || diffusion.cache() == v1::CACHE_DUAL)) {
    return Invalid("diffusion.cache",
                   absl::StrCat(v1::Cache_Name(diffusion.cache()),
                                " approximates a bidirectional model; a block-diffusion model's "
                                "finished blocks are cached exactly (CACHE_EXACT, the default, "
                                "or CACHE_NONE)"));
  }
  if (!block_causal && diffusion.has_llada2()) {
    return Invalid("diffusion.llada2", absl::StrCat("applies to block-diffusion (LLaDA2) models; "
                                                    "the served model is ",
                                                    ArchName(model.config().arch)));
  }
  if (block_causal && !spec.suffix.empty()) {
    return Invalid("prompt.suffix",
                   "a block-diffusion model is block-causal: no block reads the text after it, "
                   "so it cannot fill a span before a suffix");
  }
  absl::StatusOr<SamplerConfig> config =
      SamplerConfigFromProto(diffusion, sampling, model.config());
  if (!config.ok()) return config.status();
  spec.sampler = *config;
  DLLM_ASSIGN_OR_RETURN(spec.caching, CachingOptionsFromProto(diffusion, spec.sampler.gen_length));
  if (block_causal && diffusion.cache() == v1::CACHE_UNSPECIFIED) {
    spec.caching.cache = CacheMode::kExact;
  }
  const int64_t fixed = static_cast<int64_t>(spec.prompt.size() + spec.suffix.size());
  if (!spec.suffix.empty() && fixed >= n_ctx) {
    return Invalid(
        "prompt.suffix",
        absl::StrCat("prompt ", spec.prompt.size(), " + suffix ", spec.suffix.size(),
                     " tokens leave no room for a span in the model's context of ", n_ctx));
  }
  const int64_t canvas_len =
      block_causal ? spec.sampler.Llada2CanvasLength(static_cast<int>(spec.prompt.size()))
                   : fixed + spec.sampler.gen_length;
  if (const int64_t canvas = canvas_len; canvas > n_ctx) {
    return Invalid(
        "diffusion.gen_length",
        absl::StrCat("prompt ", spec.prompt.size(), " + gen_length ", spec.sampler.gen_length,
                     spec.suffix.empty() ? "" : absl::StrCat(" + suffix ", spec.suffix.size()),
                     " = ", canvas, " tokens exceed the model's context of ", n_ctx));
  }
  spec.seed_was_set = sampling.has_seed();
  spec.sampler.seed = sampling.has_seed() ? sampling.seed() : NewSeed();
  return spec;
}

}  // namespace

std::string NewRequestId() {
  std::lock_guard<std::mutex> lock(random_mutex);
  return absl::StrFormat("req-%016x", Random()());
}

uint64_t NewSeed() {
  std::lock_guard<std::mutex> lock(random_mutex);
  // Below 2^53 so that JSON clients (doubles) can echo it back exactly.
  return Random()() >> 11;
}

absl::string_view ModelFileName(absl::string_view path) {
  if (const size_t slash = path.rfind('/'); slash != absl::string_view::npos) {
    path.remove_prefix(slash + 1);
  }
  return path;
}

absl::string_view ModelFileStem(absl::string_view path) {
  absl::string_view base = ModelFileName(path);
  absl::ConsumeSuffix(&base, ".gguf");
  return base;
}

bool NamesServedModel(absl::string_view model, const Model& served, absl::string_view path) {
  if (model.empty() || model == served.config().name) return true;
  return model == ModelFileName(path) || model == ModelFileStem(path);
}

absl::StatusOr<ChatTemplate> RequestChatTemplate(absl::string_view name, const Model& model,
                                                 absl::string_view field) {
  if (name.empty()) return model.chat_template();
  absl::StatusOr<ChatTemplate> t = ParseChatTemplate(name);
  if (!t.ok()) return Invalid(field, t.status().message());
  return t;
}

absl::StatusOr<std::vector<int32_t>> EncodeTextPrompt(const TextPrompt& prompt, const Model& model,
                                                      absl::string_view field_prefix) {
  auto field = [&](absl::string_view name) { return absl::StrCat(field_prefix, name); };
  if (const int64_t bad = FirstInvalidUtf8(prompt.text); bad >= 0) {
    return Invalid(field("text"), absl::StrCat("invalid UTF-8 at byte ", bad));
  }
  if (const int64_t bad = FirstInvalidUtf8(prompt.how.system); bad >= 0) {
    return Invalid(field("system"), absl::StrCat("invalid UTF-8 at byte ", bad));
  }
  if (!prompt.how.chat && !prompt.how.system.empty()) {
    return Invalid(field("system"), "needs apply_chat_template");
  }
  if (!prompt.how.chat && !prompt.chat_template.empty()) {
    return Invalid(field("chat_template"), "needs apply_chat_template");
  }
  DLLM_ASSIGN_OR_RETURN(ChatTemplate templ,
                        RequestChatTemplate(prompt.chat_template, model, field("chat_template")));
  return EncodePrompt(model.tokenizer(), templ, prompt.text, prompt.how);
}

absl::StatusOr<std::vector<int32_t>> ValidatePrompt(const v1::Prompt& prompt, const Model& model) {
  const ModelConfig& c = model.config();
  switch (prompt.input_case()) {
    case v1::Prompt::kText: {
      if (prompt.text().empty()) return Invalid("prompt.text", "empty");
      // Bounded by its length first: a text longer than the context times
      // the longest token cannot fit, and tokenizing megabytes would hold
      // this gRPC thread for most of a second.
      const size_t max_bytes =
          static_cast<size_t>(c.n_ctx_train) * model.tokenizer().max_token_bytes();
      for (const auto& [name, bytes] : {std::pair{"prompt.text", prompt.text().size()},
                                        {"prompt.system", prompt.system().size()}}) {
        if (bytes > max_bytes) {
          return Invalid(name, absl::StrCat(bytes, " bytes cannot fit the model's context of ",
                                            c.n_ctx_train, " tokens (no token covers more than ",
                                            model.tokenizer().max_token_bytes(), " bytes)"));
        }
      }
      TextPrompt text;
      text.text = prompt.text();
      text.chat_template = prompt.chat_template();
      text.how.chat = prompt.apply_chat_template();
      text.how.system = prompt.system();
      DLLM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, EncodeTextPrompt(text, model, "prompt."));
      if (ids.empty()) return Invalid("prompt.text", "tokenizes to no tokens");
      // Special-token texts are parsed (as llama-diffusion-cli does), so the
      // mask token's text would put a mask into the prompt: the sampler
      // would then treat that prompt position as one to generate. Refused,
      // naming the field that holds it.
      if (std::find(ids.begin(), ids.end(), c.tokens.mask) != ids.end()) {
        const std::string piece = model.tokenizer().TokenPiece(c.tokens.mask);
        const char* field =
            absl::StrContains(prompt.system(), piece) ? "prompt.system" : "prompt.text";
        return Invalid(field, absl::StrCat("contains the mask token '", piece, "' (id ",
                                           c.tokens.mask, "); a prompt cannot hold masks"));
      }
      return ids;
    }
    case v1::Prompt::kTokenIds: {
      const auto& ids = prompt.token_ids().ids();
      if (ids.empty()) return Invalid("prompt.token_ids", "empty");
      if (prompt.apply_chat_template()) {
        return Invalid("prompt.apply_chat_template", "applies to prompt.text only");
      }
      if (!prompt.system().empty()) return Invalid("prompt.system", "applies to prompt.text only");
      if (!prompt.chat_template().empty()) {
        return Invalid("prompt.chat_template", "applies to prompt.text only");
      }
      return CanvasIds(prompt.token_ids(), "prompt.token_ids", c);
    }
    case v1::Prompt::INPUT_NOT_SET:
      break;
  }
  return Invalid("prompt", "empty (set prompt.text or prompt.token_ids)");
}

absl::StatusOr<std::vector<int32_t>> ValidateSuffix(const v1::Prompt& prompt, const Model& model) {
  const ModelConfig& c = model.config();
  const v1::Suffix& suffix = prompt.suffix();
  if (!prompt.has_suffix() || suffix.input_case() == v1::Suffix::INPUT_NOT_SET) {
    return std::vector<int32_t>();
  }
  if (prompt.apply_chat_template()) {
    return Invalid(
        "prompt.suffix",
        "infill takes a plain prompt; it cannot follow a chat template's assistant turn");
  }
  std::vector<int32_t> out;
  if (suffix.input_case() == v1::Suffix::kText) {
    if (suffix.text().empty()) return Invalid("prompt.suffix.text", "empty");
    const size_t max_bytes =
        static_cast<size_t>(c.n_ctx_train) * model.tokenizer().max_token_bytes();
    if (suffix.text().size() > max_bytes) {
      return Invalid("prompt.suffix.text",
                     absl::StrCat(suffix.text().size(), " bytes cannot fit the model's context of ",
                                  c.n_ctx_train, " tokens"));
    }
    if (const int64_t bad = FirstInvalidUtf8(suffix.text()); bad >= 0) {
      return Invalid("prompt.suffix.text", absl::StrCat("invalid UTF-8 at byte ", bad));
    }
    // Special-token texts stay text, so no mask (or end-of-text) can hide in it.
    out = model.tokenizer().Encode(suffix.text(), /*add_special=*/false, /*parse_special=*/false);
    if (out.empty()) return Invalid("prompt.suffix.text", "tokenizes to no tokens");
    return out;
  }
  if (suffix.token_ids().ids().empty()) return Invalid("prompt.suffix.token_ids", "empty");
  return CanvasIds(suffix.token_ids(), "prompt.suffix.token_ids", c);
}

absl::StatusOr<SamplerConfig> SamplerConfigFromProto(const v1::DiffusionParams& d,
                                                     const v1::SamplingParams& s,
                                                     const ModelConfig& config) {
  const int64_t n_ctx = config.n_ctx_train;
  for (const auto& [field, value] : {std::pair{"diffusion.gen_length", d.gen_length()},
                                     {"diffusion.steps", d.steps()},
                                     {"diffusion.block_length", d.block_length()}}) {
    if (value > n_ctx) {
      return Invalid(field, absl::StrCat(value, " exceeds the model's context of ", n_ctx));
    }
  }
  SamplerConfig c = DefaultSamplerConfig(
      config, d.gen_length() == 0 ? kDefaultGenLength : static_cast<int>(d.gen_length()));
  if (d.steps() != 0) c.steps = static_cast<int>(d.steps());
  if (d.block_length() != 0) c.block_length = static_cast<int>(d.block_length());
  if (!v1::Algorithm_IsValid(d.algorithm())) {
    return Invalid("diffusion.algorithm", absl::StrCat("unknown value ", d.algorithm()));
  }
  if (d.algorithm() != v1::ALGORITHM_UNSPECIFIED) {
    c.algorithm = static_cast<Algorithm>(d.algorithm() - 1);
    if (!AlgorithmFitsFamily(c.algorithm, c.family)) {
      return Invalid("diffusion.algorithm",
                     absl::StrCat(v1::Algorithm_Name(d.algorithm()), " does not fit the served ",
                                  ArchName(config.arch), " model (its sampler takes ",
                                  absl::AsciiStrToUpper(FamilyAlgorithmNames(c.family)), ")"));
    }
  }
  if (d.has_threshold()) c.threshold = d.threshold();
  if (c.family == SamplerFamily::kLlada2) {
    // What the masked samplers take and LLaDA2's has no use for: refused,
    // so that a client learns its setting did nothing.
    for (const auto& [field, set] :
         {std::pair{"diffusion.steps", d.steps() != 0},
          {"diffusion.eps", d.has_eps()},
          {"diffusion.cfg_scale", d.cfg_scale() != 0},
          {"diffusion.logits_eos_inf", d.logits_eos_inf()},
          {"diffusion.confidence_eos_eot_inf", d.confidence_eos_eot_inf()},
          {"diffusion.cache_refresh_steps", d.cache_refresh_steps() != 0},
          {"sampling.alg_temp", s.alg_temp() != 0}}) {
      if (set) {
        return Invalid(field,
                       "does not apply to LLaDA2's sampler (its blocks are scheduled by "
                       "diffusion.llada2.steps_per_block)");
      }
    }
    const v1::Llada2Params& l = d.llada2();
    if (l.steps_per_block() > (1u << 20)) {
      return Invalid("diffusion.llada2.steps_per_block",
                     absl::StrCat(l.steps_per_block(), " is too large"));
    }
    if (l.steps_per_block() != 0) c.steps_per_block = static_cast<int>(l.steps_per_block());
    if (l.has_editing_threshold()) c.editing_threshold = l.editing_threshold();
    if (l.has_max_post_steps()) {
      if (l.max_post_steps() > (1u << 20)) {
        return Invalid("diffusion.llada2.max_post_steps",
                       absl::StrCat(l.max_post_steps(), " is too large"));
      }
      c.max_post_steps = static_cast<int>(l.max_post_steps());
    }
  }
  if (d.has_eps()) c.eps = d.eps();
  c.cfg_scale = d.cfg_scale();
  if (d.has_early_exit()) c.early_exit = d.early_exit();
  c.logits_eos_inf = d.logits_eos_inf();
  c.confidence_eos_eot_inf = d.confidence_eos_eot_inf();
  c.temperature = s.temperature();
  // Proto3 zero is "unset" for top_p: the default (off).
  if (s.top_p() != 0.0f) c.top_p = s.top_p();
  if (s.top_k() > (1u << 30))
    return Invalid("sampling.top_k", absl::StrCat(s.top_k(), " is too large"));
  c.top_k = static_cast<int>(s.top_k());
  c.alg_temp = s.alg_temp();
  if (absl::Status st = c.Validate(); !st.ok()) return RenameSamplerField(st);
  return c;
}

absl::StatusOr<bool> UsesEntropyBound(const v1::DiffusionParams& d, const ModelConfig& config) {
  if (!v1::Sampler_IsValid(d.sampler())) {
    return Invalid("diffusion.sampler", absl::StrCat("unknown value ", d.sampler()));
  }
  switch (d.sampler()) {
    case v1::SAMPLER_MASKED:
      return false;
    case v1::SAMPLER_ENTROPY_BOUND:
      if (config.canvas_length == 0) {
        return Invalid(
            "diffusion.sampler",
            absl::StrCat("SAMPLER_ENTROPY_BOUND needs a canvas model; the served ",
                         ArchName(config.arch), " model has no diffusion.canvas_length"));
      }
      return true;
    default:
      return config.canvas_length > 0;
  }
}

absl::StatusOr<EntropyBoundRequest> EntropyBoundFromProto(const v1::DiffusionParams& d,
                                                          const v1::SamplingParams& s,
                                                          const Model& model,
                                                          CachingOptions* caching) {
  // What the masked samplers take and this one has no use for: refused,
  // rather than ignored, so that a client learns its setting did nothing.
  const std::pair<const char*, bool> masked_only[] = {
      {"diffusion.steps", d.steps() != 0},
      {"diffusion.block_length", d.block_length() != 0},
      {"diffusion.algorithm", d.algorithm() != v1::ALGORITHM_UNSPECIFIED},
      {"diffusion.threshold", d.has_threshold()},
      {"diffusion.eps", d.has_eps()},
      {"diffusion.cfg_scale", d.cfg_scale() != 0},
      {"diffusion.early_exit", d.has_early_exit()},
      {"diffusion.logits_eos_inf", d.logits_eos_inf()},
      {"diffusion.confidence_eos_eot_inf", d.confidence_eos_eot_inf()},
      {"diffusion.cache_refresh_steps", d.cache_refresh_steps() != 0},
      {"sampling.temperature", s.temperature() != 0},
      {"sampling.top_p", s.top_p() != 0 && s.top_p() != 1},
      {"sampling.top_k", s.top_k() != 0},
      {"sampling.alg_temp", s.alg_temp() != 0},
  };
  for (const auto& [field, set] : masked_only) {
    if (!set) continue;
    // The sampling settings have their counterparts in entropy_bound.
    const bool sampling = absl::StartsWith(field, "sampling.");
    return Invalid(field, absl::StrCat("does not apply to the entropy-bound sampler",
                                       sampling ? " (its temperatures run from "
                                                  "entropy_bound.t_max down toward t_min)"
                                                : ""));
  }
  if (!v1::Cache_IsValid(d.cache())) {
    return Invalid("diffusion.cache", absl::StrCat("unknown value ", d.cache()));
  }
  if (d.cache() == v1::CACHE_PREFIX || d.cache() == v1::CACHE_DUAL) {
    return Invalid("diffusion.cache",
                   absl::StrCat(v1::Cache_Name(d.cache()),
                                " approximates a masked sampler's canvas; the entropy-bound "
                                "sampler takes CACHE_EXACT (the default) or CACHE_NONE"));
  }
  *caching = CachingOptions{};
  caching->cache = d.cache() == v1::CACHE_NONE ? CacheMode::kNone : CacheMode::kExact;

  EntropyBoundRequest out;
  absl::StatusOr<EntropyBoundConfig> file = EntropyBoundConfigFromGguf(model.file());
  if (!file.ok()) return file.status();  // names the bad key (the server checks them at start)
  EntropyBoundConfig& c = out.config = *file;
  const v1::EntropyBoundParams& e = d.entropy_bound();
  if (e.has_max_steps()) {
    if (e.max_steps() < 1 || e.max_steps() > (1u << 20)) {
      return Invalid("diffusion.entropy_bound.max_steps",
                     absl::StrCat(e.max_steps(), " is outside [1, ", 1u << 20, "]"));
    }
    c.max_steps = static_cast<int>(e.max_steps());
  }
  if (e.has_stability_threshold()) {
    if (e.stability_threshold() > (1u << 20)) {
      return Invalid("diffusion.entropy_bound.stability_threshold",
                     absl::StrCat(e.stability_threshold(), " is too large"));
    }
    c.stability_threshold = static_cast<int>(e.stability_threshold());
  }
  if (e.has_t_min()) c.t_min = e.t_min();
  if (e.has_t_max()) c.t_max = e.t_max();
  if (e.has_entropy_bound()) c.entropy_bound = e.entropy_bound();
  if (e.has_confidence_threshold()) c.confidence_threshold = e.confidence_threshold();
  if (absl::Status st = c.Validate(); !st.ok()) {
    // Validate() says "entropy-bound sampler: FIELD: why"; the client knows
    // the field by its proto path.
    absl::string_view message = st.message();
    absl::ConsumePrefix(&message, "entropy-bound sampler: ");
    return absl::InvalidArgumentError(absl::StrCat("diffusion.entropy_bound.", message));
  }
  out.max_tokens = d.gen_length() == 0 ? c.canvas_length : static_cast<int>(d.gen_length());
  out.run.max_canvases = CanvasesFor(out.max_tokens, c.canvas_length);
  out.run.context = model.config().n_ctx_train;
  out.run.stop_ids = model.config().tokens.StopIds();
  return out;
}

absl::StatusOr<CachingOptions> CachingOptionsFromProto(const v1::DiffusionParams& d,
                                                       int gen_length) {
  CachingOptions o;
  if (!v1::Cache_IsValid(d.cache())) {
    return Invalid("diffusion.cache", absl::StrCat("unknown value ", d.cache()));
  }
  o.cache = CacheModeFromProto(d.cache());
  if (d.cache_refresh_steps() > static_cast<uint32_t>(gen_length)) {
    return Invalid("diffusion.cache_refresh_steps",
                   absl::StrCat(d.cache_refresh_steps(), " exceeds gen_length ", gen_length));
  }
  o.cache_refresh_steps = static_cast<int>(d.cache_refresh_steps());
  if (absl::Status st = o.Validate(); !st.ok()) return RenameSamplerField(st);
  return o;
}

absl::StatusOr<StreamSettings> StreamSettingsFromProto(const v1::StreamOptions& stream) {
  StreamSettings out;
  if (!v1::Detail_IsValid(stream.detail())) {
    return Invalid("stream.detail", absl::StrCat("unknown value ", stream.detail()));
  }
  out.detail = stream.detail() == v1::DETAIL_UNSPECIFIED ? v1::DETAIL_TEXT : stream.detail();
  if (stream.step_stride() > (1u << 20)) {
    return Invalid("stream.step_stride", absl::StrCat(stream.step_stride(), " is too large"));
  }
  out.step_stride = stream.step_stride() == 0 ? 1 : static_cast<int>(stream.step_stride());
  if (stream.top_candidates() > static_cast<uint32_t>(kMaxTopCandidates)) {
    return Invalid(
        "stream.top_candidates",
        absl::StrCat(stream.top_candidates(), " exceeds the limit of ", kMaxTopCandidates));
  }
  if (stream.top_candidates() > 0 && out.detail < v1::DETAIL_STEPS) {
    return Invalid("stream.top_candidates", "needs detail DETAIL_STEPS or DETAIL_CANVAS");
  }
  out.top_candidates = static_cast<int>(stream.top_candidates());
  out.include_timings = stream.include_timings();
  if (stream.include_logprobs() && out.detail < v1::DETAIL_STEPS) {
    return Invalid("stream.include_logprobs", "needs detail DETAIL_STEPS or DETAIL_CANVAS");
  }
  out.include_logprobs = stream.include_logprobs();
  if (stream.heartbeat_seconds() > kMaxHeartbeatSeconds) {
    return Invalid(
        "stream.heartbeat_seconds",
        absl::StrCat(stream.heartbeat_seconds(), " exceeds the limit of ", kMaxHeartbeatSeconds));
  }
  out.heartbeat_seconds = stream.heartbeat_seconds() == 0
                              ? static_cast<int>(kDefaultHeartbeatSeconds)
                              : static_cast<int>(stream.heartbeat_seconds());
  return out;
}

int GenerationSpec::canvas_tokens() const {
  if (entropy_bound) {
    return static_cast<int>(prompt.size()) +
           entropy_bound->run.max_canvases * entropy_bound->config.canvas_length;
  }
  if (sampler.family == SamplerFamily::kLlada2) {
    return sampler.Llada2CanvasLength(static_cast<int>(prompt.size()));
  }
  return static_cast<int>(prompt.size() + suffix.size()) + sampler.gen_length;
}

int GenerationSpec::planned_steps() const {
  if (entropy_bound) return entropy_bound->config.max_steps * entropy_bound->run.max_canvases;
  return sampler.PlannedSteps();
}

absl::StatusOr<GenerationSpec> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                       const Model& model,
                                                       absl::string_view model_path) {
  absl::StatusOr<GenerationSpec> spec =
      ValidateCommon(request.request_id(), request.model(), request.prompt(), request.diffusion(),
                     request.sampling(), model, model_path);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<StreamSettings> stream = StreamSettingsFromProto(request.stream());
  if (!stream.ok()) return stream.status();
  spec->stream = *stream;
  if (spec->entropy_bound) {
    // Candidates and log-probabilities score a committed position; the
    // entropy-bound sampler commits none for good.
    if (stream->include_logprobs) {
      return Invalid("stream.include_logprobs", "does not apply to the entropy-bound sampler");
    }
    if (stream->top_candidates > 0) {
      return Invalid("stream.top_candidates", "does not apply to the entropy-bound sampler");
    }
  }
  return spec;
}

absl::StatusOr<GenerationSpec> ValidateOpen(const v1::Open& open, const Model& model,
                                            absl::string_view model_path) {
  return ValidateCommon(open.request_id(), open.model(), open.prompt(), open.diffusion(),
                        open.sampling(), model, model_path);
}

v1::Algorithm AlgorithmToProto(Algorithm algorithm) {
  return static_cast<v1::Algorithm>(static_cast<int>(algorithm) + 1);
}

v1::EntropyBoundParams EntropyBoundParamsToProto(const EntropyBoundConfig& c) {
  v1::EntropyBoundParams e;
  e.set_max_steps(c.max_steps);
  e.set_t_min(c.t_min);
  e.set_t_max(c.t_max);
  e.set_entropy_bound(c.entropy_bound);
  e.set_stability_threshold(c.stability_threshold);
  e.set_confidence_threshold(c.confidence_threshold);
  return e;
}

v1::DiffusionParams DefaultDiffusionParams(const Model& model) {
  const ModelConfig& config = model.config();
  v1::DiffusionParams d;
  if (config.canvas_length > 0) {
    // The entropy-bound sampler's: one canvas, the exact cache, the file's
    // settings (the server checked them at start).
    d.set_sampler(v1::SAMPLER_ENTROPY_BOUND);
    d.set_gen_length(config.canvas_length);
    d.set_cache(v1::CACHE_EXACT);
    *d.mutable_entropy_bound() = EntropyBoundParamsToProto(
        EntropyBoundConfigFromGguf(model.file()).value_or(EntropyBoundConfig{}));
    return d;
  }
  const SamplerConfig c = DefaultSamplerConfig(config, kDefaultGenLength);
  d.set_sampler(v1::SAMPLER_MASKED);
  d.set_gen_length(c.gen_length);
  if (c.family == SamplerFamily::kLlada2) {
    // LLaDA2's: blocks scheduled on their own, the threshold, the exact cache.
    d.set_block_length(c.block_length);
    d.set_algorithm(AlgorithmToProto(c.algorithm));
    d.set_early_exit(c.early_exit);
    if (c.threshold) d.set_threshold(*c.threshold);
    d.set_cache(v1::CACHE_EXACT);
    v1::Llada2Params* l = d.mutable_llada2();
    l->set_steps_per_block(static_cast<uint32_t>(c.steps_per_block));
    l->set_max_post_steps(static_cast<uint32_t>(c.max_post_steps));
    return d;
  }
  d.set_steps(c.steps);
  d.set_block_length(c.EffectiveBlockLength());
  d.set_algorithm(AlgorithmToProto(c.algorithm));
  d.set_early_exit(c.early_exit);
  if (c.family == SamplerFamily::kDream) d.set_eps(c.eps);
  return d;
}

v1::SamplingParams DefaultSamplingParams(const Model& model) {
  // The entropy-bound sampler takes only a seed (the server draws one).
  if (model.config().canvas_length > 0) return v1::SamplingParams();
  const SamplerConfig c = DefaultSamplerConfig(model.config(), kDefaultGenLength);
  v1::SamplingParams s;
  s.set_temperature(c.temperature);
  s.set_top_p(c.top_p);
  s.set_top_k(static_cast<uint32_t>(c.top_k));
  s.set_alg_temp(c.alg_temp);
  return s;
}

}  // namespace dllm
