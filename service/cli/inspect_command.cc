#include "absl/strings/string_view.h"
#include "service/cli/inspect_command.h"

#include <cstdio>
#include <map>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model/forward.h"
#include "absl/strings/match.h"
#include "engine/base/utf8.h"
#include "engine/model/model.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"
#include "engine/tokenizer/chat_template.h"
#include "service/cli/flags.h"

namespace dllm {
namespace {

std::string ChatTemplateSummary(const Json& tokenizer) {
  const std::string family = tokenizer["chat_template_family"].as_string();
  if (!tokenizer["chat_template"].as_bool()) return "absent (" + family + " is used)";
  if (!tokenizer["chat_template_recognised"].as_bool()) {
    return "present, not recognised (" + family + " is used)";
  }
  return "present (" + family + ")";
}

Json HyperparametersJson(const ModelConfig& c) {
  Json h = Json::MakeObject();
  h.Set("n_layer", c.n_layer);
  h.Set("n_embd", c.n_embd);
  h.Set("n_head", c.n_head);
  h.Set("n_head_kv", c.n_head_kv);
  h.Set("head_dim", c.head_dim);
  h.Set("n_ff", c.n_ff);
  h.Set("n_vocab", c.n_vocab);
  h.Set("n_ctx_train", c.n_ctx_train);
  h.Set("rope_type", std::string(RopeTypeName(c.rope_type)));
  h.Set("rope_theta", c.rope_theta);
  h.Set("rms_eps", c.rms_eps);
  h.Set("shift_logits", c.shift_logits);
  h.Set("tied_output", c.tied_output);
  if (c.moe()) {
    h.Set("n_expert", c.n_expert);
    h.Set("n_expert_used", c.n_expert_used);
    h.Set("n_ff_exp", c.n_ff_exp);
    h.Set("expert_weights_norm", c.traits().moe_norm_weights);
  }
  h.Set("active_layer_params", c.active_layer_params());
  return h;
}

Json TokenizerJson(const GgufFile& f, const ModelConfig& c) {
  Json t = Json::MakeObject();
  t.Set("model", c.tokenizer_model);
  t.Set("pre", c.tokenizer_pre);
  const GgufValue* tokens = f.FindValue("tokenizer.ggml.tokens");
  t.Set("vocab_size", static_cast<int64_t>(tokens ? tokens->count : 0));
  const GgufValue* merges = f.FindValue("tokenizer.ggml.merges");
  t.Set("merges", static_cast<int64_t>(merges ? merges->count : 0));
  t.Set("bos_token_id", c.tokens.bos);
  t.Set("eos_token_id", c.tokens.eos);
  t.Set("eot_token_id", c.tokens.eot);
  t.Set("mask_token_id", c.tokens.mask);
  t.Set("add_bos_token", c.tokens.add_bos);
  t.Set("chat_template", c.has_chat_template);
  const ChatTemplate templ = DetectChatTemplate(f);
  t.Set("chat_template_family", templ.name);
  t.Set("chat_template_recognised", templ.recognised);
  return t;
}

}  // namespace

absl::StatusOr<Json> InspectReport(const GgufFile& f, int canvas) {
  Json r = Json::MakeObject();
  r.Set("file", f.path());
  r.Set("file_bytes", static_cast<int64_t>(f.file_size()));
  r.Set("gguf_version", static_cast<int64_t>(f.version()));
  r.Set("alignment", static_cast<int64_t>(f.alignment()));
  r.Set("n_metadata", static_cast<int64_t>(f.metadata().size()));
  absl::string_view arch = "";
  if (const GgufValue* a = f.FindValue("general.architecture");
      a && a->type == GgufValueType::kString) {
    arch = a->str;
  }
  r.Set("architecture", arch);

  Json tensors = Json::MakeArray();
  std::map<absl::string_view, std::pair<int64_t, int64_t>> per_type;  // count, bytes
  int64_t total_bytes = 0;
  for (const GgufTensor& t : f.tensors()) {
    Json e = Json::MakeObject();
    e.Set("name", t.name);
    e.Set("type", GgmlTypeName(t.type));
    Json shape = Json::MakeArray();
    for (int d = 0; d < t.n_dims; ++d) shape.Push(t.ne[d]);
    e.Set("shape", shape);
    e.Set("bytes", static_cast<int64_t>(t.n_bytes));
    tensors.Push(e);
    auto& [count, bytes] = per_type[GgmlTypeName(t.type)];
    ++count;
    bytes += static_cast<int64_t>(t.n_bytes);
    total_bytes += static_cast<int64_t>(t.n_bytes);
  }
  r.Set("tensors", tensors);
  Json totals = Json::MakeObject();
  for (const auto& [type, cb] : per_type) {
    Json e = Json::MakeObject();
    e.Set("count", cb.first);
    e.Set("bytes", cb.second);
    totals.Set(std::string(type), e);
  }
  r.Set("tensor_totals", totals);
  r.Set("tensor_bytes", total_bytes);

  // "Can it run" is the loader's own verdict (ReadModelSpec runs every check
  // Model::Load makes before repacking); the other problems found are listed
  // after the loader's message, so one look shows all there is to fix.
  Json problems = Json::MakeArray();
  absl::StatusOr<ModelSpec> spec = ReadModelSpec(f);
  if (!spec.ok()) problems.Push(std::string(spec.status().message()));
  absl::StatusOr<ModelConfig> config = ModelConfigFromGguf(f);
  if (config.ok()) {
    r.Set("hyperparameters", HyperparametersJson(*config));
    r.Set("tokenizer", TokenizerJson(f, *config));
    for (const std::string& p : CompatibilityProblems(f, *config)) {
      if (!spec.ok() && absl::StrContains(spec.status().message(), p)) continue;
      problems.Push(p);
    }
    if (canvas > 0) {
      // What serving a canvas of this size keeps resident: the weights once
      // (mapped or repacked), the activation buffers and the logits rows.
      Json mem = Json::MakeObject();
      const int64_t act = static_cast<int64_t>(ForwardPass::ActivationBytes(*config, canvas));
      const int64_t logits = int64_t{canvas} * config->n_vocab * 4;
      mem.Set("canvas", canvas);
      mem.Set("weights_bytes", total_bytes);
      mem.Set("activation_bytes", act);
      mem.Set("logits_bytes", logits);
      mem.Set("peak_bytes_estimate", static_cast<int64_t>(f.file_size()) + act + logits);
      r.Set("memory", mem);
    }
  }
  Json compat = Json::MakeObject();
  compat.Set("can_run", spec.ok());
  compat.Set("problems", problems);
  r.Set("compatibility", compat);
  return r;
}

std::string RenderInspectReport(const Json& r) {
  std::string out;
  absl::StrAppendFormat(&out, "file          %s\n", r["file"].as_string());
  absl::StrAppendFormat(&out, "format        GGUF v%d, %d bytes, alignment %d, %d metadata keys\n",
                        r["gguf_version"].as_int(), r["file_bytes"].as_int(),
                        r["alignment"].as_int(), r["n_metadata"].as_int());
  absl::StrAppendFormat(&out, "architecture  %s\n", r["architecture"].as_string());
  if (const Json* h = r.Get("hyperparameters")) {
    const Json& hp = *h;
    absl::StrAppendFormat(&out,
                          "model         n_layer %d  n_embd %d  n_head %d  n_head_kv %d  "
                          "head_dim %d  n_ff %d  n_vocab %d\n",
                          hp["n_layer"].as_int(), hp["n_embd"].as_int(), hp["n_head"].as_int(),
                          hp["n_head_kv"].as_int(), hp["head_dim"].as_int(), hp["n_ff"].as_int(),
                          hp["n_vocab"].as_int());
    if (const Json* experts = hp.Get("n_expert")) {
      absl::StrAppendFormat(&out,
                            "experts       %d, %d active per token, FFN width %d, weights %s; "
                            "%.2f B active layer parameters per token\n",
                            experts->as_int(), hp["n_expert_used"].as_int(),
                            hp["n_ff_exp"].as_int(),
                            hp["expert_weights_norm"].as_bool() ? "renormalised" : "as routed",
                            hp["active_layer_params"].as_int() / 1e9);
    }
    absl::StrAppendFormat(&out,
                          "              rope %s theta %g  rms_eps %g  context %d  "
                          "shift_logits %s  output %s\n",
                          hp["rope_type"].as_string(), hp["rope_theta"].as_double(),
                          hp["rms_eps"].as_double(), hp["n_ctx_train"].as_int(),
                          hp["shift_logits"].as_bool() ? "yes" : "no",
                          hp["tied_output"].as_bool() ? "tied to token_embd" : "untied");
    const Json& t = r["tokenizer"];
    absl::StrAppendFormat(&out,
                          "tokenizer     %s (pre %s), %d tokens, %d merges, bos %d eos %d eot %d "
                          "mask %d, add_bos %s, chat template %s\n",
                          t["model"].as_string(), t["pre"].as_string(), t["vocab_size"].as_int(),
                          t["merges"].as_int(), t["bos_token_id"].as_int(),
                          t["eos_token_id"].as_int(), t["eot_token_id"].as_int(),
                          t["mask_token_id"].as_int(), t["add_bos_token"].as_bool() ? "yes" : "no",
                          ChatTemplateSummary(t));
  }
  absl::StrAppendFormat(&out, "\n%-32s %-6s %-16s %12s\n", "tensor", "type", "shape", "bytes");
  for (const Json& t : r["tensors"].as_array()) {
    std::string shape;
    for (const Json& d : t["shape"].as_array()) {
      absl::StrAppend(&shape, shape.empty() ? "" : "x", d.as_int());
    }
    absl::StrAppendFormat(&out, "%-32s %-6s %-16s %12d\n", t["name"].as_string(),
                          t["type"].as_string(), shape, t["bytes"].as_int());
  }
  absl::StrAppendFormat(&out, "\n%-10s %8s %14s\n", "type", "tensors", "bytes");
  for (const auto& [type, e] : r["tensor_totals"].as_object()) {
    absl::StrAppendFormat(&out, "%-10s %8d %14d\n", type, e["count"].as_int(),
                          e["bytes"].as_int());
  }
  absl::StrAppendFormat(&out, "%-10s %8d %14d\n", "total", r["tensors"].size(),
                        r["tensor_bytes"].as_int());
  if (const Json* mem = r.Get("memory")) {
    absl::StrAppendFormat(&out,
                          "\nmemory        canvas %d: file %.1f MiB + activations %.1f MiB + "
                          "logits %.1f MiB = peak about %.1f MiB\n",
                          (*mem)["canvas"].as_int(), r["file_bytes"].as_int() / 1048576.0,
                          (*mem)["activation_bytes"].as_int() / 1048576.0,
                          (*mem)["logits_bytes"].as_int() / 1048576.0,
                          (*mem)["peak_bytes_estimate"].as_int() / 1048576.0);
  }
  const Json& compat = r["compatibility"];
  if (compat["can_run"].as_bool()) {
    out += "\ncompatible    yes: this build can run this file\n";
  } else {
    out += "\ncompatible    no: the loader refuses this file:\n";
    for (const Json& p : compat["problems"].as_array()) {
      absl::StrAppendFormat(&out, "  - %s\n", PrintableText(p.as_string()));
    }
  }
  return out;
}

constexpr char kInspectUsage[] =
    "usage: dllm inspect MODEL.gguf [--json] [--canvas N]\n"
    "  what the file holds and whether this build runs it (the loader's own checks);\n"
    "  --canvas N adds the memory a canvas of N tokens needs\n";

int RunInspect(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags = ParseFlags(argc, argv, {"canvas"}, {"json"});
  if (!flags.ok()) return FailCommand("inspect", flags.status());
  if (flags->help) return PrintHelp(kInspectUsage);
  absl::StatusOr<int64_t> canvas = flags->GetInt("canvas", 0);
  if (!canvas.ok()) return FailCommand("inspect", canvas.status());
  if (flags->positional.size() != 1 || *canvas < 0 || *canvas > (1 << 20)) {
    std::fputs(kInspectUsage, stderr);
    return 2;
  }
  const std::string& path = flags->positional[0];
  absl::StatusOr<GgufFile> file = GgufFile::Open(path);
  if (!file.ok()) return FailCommand("inspect", file.status());
  absl::StatusOr<Json> report = InspectReport(*file, static_cast<int>(*canvas));
  if (!report.ok()) return FailCommand("inspect", report.status());
  const std::string text = flags->Has("json") ? report->Dump(2) + "\n" : RenderInspectReport(*report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace dllm
