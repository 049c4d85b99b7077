#include "service/cli/inspect_command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "engine/base/flags.h"
#include "engine/base/utf8.h"
#include "engine/model/forward.h"
#include "engine/model/model.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"
#include "engine/tokenizer/chat_template.h"

namespace dllm {
namespace {

std::string ChatTemplateSummary(const Json& tokenizer) {
  const std::string family = tokenizer["chat_template_family"].get<std::string>();
  if (!tokenizer["chat_template"].get<bool>()) return "absent (" + family + " is used)";
  if (!tokenizer["chat_template_recognised"].get<bool>()) {
    return "present, not recognised (" + family + " is used)";
  }
  return "present (" + family + ")";
}

Json HyperparametersJson(const ModelConfig& c) {
  Json h = Json::object();
  h["n_layer"] = c.n_layer;
  h["n_embd"] = c.n_embd;
  h["n_head"] = c.n_head;
  h["n_head_kv"] = c.n_head_kv;
  h["head_dim"] = c.head_dim;
  h["n_ff"] = c.n_ff;
  h["n_vocab"] = c.n_vocab;
  h["n_ctx_train"] = c.n_ctx_train;
  h["rope_type"] = std::string(RopeTypeName(c.rope_type));
  h["rope_theta"] = c.rope_theta;
  h["rms_eps"] = c.rms_eps;
  h["shift_logits"] = c.shift_logits;
  h["tied_output"] = c.tied_output;
  if (c.moe()) {
    h["n_expert"] = c.n_expert;
    h["n_expert_used"] = c.n_expert_used;
    h["n_ff_exp"] = c.n_ff_exp;
    h["expert_weights_norm"] = c.traits().moe_norm_weights;
  }
  if (c.traits().ling_moe) {
    // LLaDA2's routing, as its first routed layer has it, and its blocks.
    int64_t dense = 0;
    while (dense < c.n_layer && c.layers[static_cast<size_t>(dense)].ffn != FfnKind::kMoe) ++dense;
    const LayerConfig& moe = c.layers[static_cast<size_t>(std::min(dense, c.n_layer - 1))];
    h["expert_weights_norm"] = moe.moe_norm_weights;
    h["routing"] = {{"score", moe.router_score == RouterScore::kSigmoid ? "sigmoid" : "softmax"},
                    {"groups", moe.n_expert_groups},
                    {"groups_used", moe.n_expert_groups_used},
                    {"weights_scale", moe.moe_weights_scale},
                    {"shared_ff", moe.n_ff_shared},
                    {"dense_layers", dense}};
    h["rope_dims"] = c.ropes.empty() ? c.head_dim : c.ropes[0].dims;
    h["block_length"] = c.block_length;
  }
  h["active_layer_params"] = c.active_layer_params();
  return h;
}

Json TokenizerJson(const GgufFile& f, const ModelConfig& c) {
  Json t = Json::object();
  t["model"] = c.tokenizer_model;
  t["pre"] = c.tokenizer_pre;
  const GgufValue* tokens = f.FindValue("tokenizer.ggml.tokens");
  t["vocab_size"] = static_cast<int64_t>(tokens ? tokens->count : 0);
  const GgufValue* merges = f.FindValue("tokenizer.ggml.merges");
  t["merges"] = static_cast<int64_t>(merges ? merges->count : 0);
  t["bos_token_id"] = c.tokens.bos;
  t["eos_token_id"] = c.tokens.eos;
  t["eot_token_id"] = c.tokens.eot;
  t["mask_token_id"] = c.tokens.mask;
  t["add_bos_token"] = c.tokens.add_bos;
  t["chat_template"] = c.has_chat_template;
  const ChatTemplate templ = DetectChatTemplate(f);
  t["chat_template_family"] = templ.name;
  t["chat_template_recognised"] = templ.recognised;
  return t;
}

}  // namespace

absl::StatusOr<Json> InspectReport(const GgufFile& f, int canvas) {
  Json r = Json::object();
  r["file"] = f.path();
  r["file_bytes"] = static_cast<int64_t>(f.file_size());
  r["gguf_version"] = static_cast<int64_t>(f.version());
  r["alignment"] = static_cast<int64_t>(f.alignment());
  r["n_metadata"] = static_cast<int64_t>(f.metadata().size());
  absl::string_view arch = "";
  if (const GgufValue* a = f.FindValue("general.architecture");
      a && a->type == GgufValueType::kString) {
    arch = a->str;
  }
  r["architecture"] = arch;

  Json tensors = Json::array();
  std::map<absl::string_view, std::pair<int64_t, int64_t>> per_type;  // count, bytes
  int64_t total_bytes = 0;
  for (const GgufTensor& t : f.tensors()) {
    Json e = Json::object();
    e["name"] = t.name;
    e["type"] = GgmlTypeName(t.type);
    Json shape = Json::array();
    for (int d = 0; d < t.n_dims; ++d) shape.push_back(t.ne[d]);
    e["shape"] = shape;
    e["bytes"] = static_cast<int64_t>(t.n_bytes);
    tensors.push_back(e);
    auto& [count, bytes] = per_type[GgmlTypeName(t.type)];
    ++count;
    bytes += static_cast<int64_t>(t.n_bytes);
    total_bytes += static_cast<int64_t>(t.n_bytes);
  }
  r["tensors"] = tensors;
  Json totals = Json::object();
  for (const auto& [type, cb] : per_type) {
    Json e = Json::object();
    e["count"] = cb.first;
    e["bytes"] = cb.second;
    totals[std::string(type)] = e;
  }
  r["tensor_totals"] = totals;
  r["tensor_bytes"] = total_bytes;

  // "Can it run" is the loader's own verdict (ReadModelSpec runs every check
  // Model::Load makes before repacking); the other problems found are listed
  // after the loader's message, so one look shows all there is to fix.
  Json problems = Json::array();
  absl::StatusOr<ModelSpec> spec = ReadModelSpec(f);
  if (!spec.ok()) problems.push_back(std::string(spec.status().message()));
  absl::StatusOr<ModelConfig> config = ModelConfigFromGguf(f);
  if (config.ok()) {
    r["hyperparameters"] = HyperparametersJson(*config);
    r["tokenizer"] = TokenizerJson(f, *config);
    for (const CompatibilityProblem& p : CompatibilityProblems(f, *config)) {
      if (!spec.ok() && absl::StrContains(spec.status().message(), p.message)) continue;
      problems.push_back(p.message);
    }
    if (canvas > 0) {
      // What serving a canvas of this size keeps resident: the weights once
      // (mapped or repacked), the activation buffers and the logits rows.
      Json mem = Json::object();
      const int64_t act = static_cast<int64_t>(ForwardPass::ActivationBytes(*config, canvas));
      const int64_t logits = int64_t{canvas} * config->n_vocab * 4;
      mem["canvas"] = canvas;
      mem["weights_bytes"] = total_bytes;
      mem["activation_bytes"] = act;
      mem["logits_bytes"] = logits;
      mem["peak_bytes_estimate"] = static_cast<int64_t>(f.file_size()) + act + logits;
      r["memory"] = mem;
    }
  }
  Json compat = Json::object();
  compat["can_run"] = spec.ok();
  compat["problems"] = problems;
  r["compatibility"] = compat;
  return r;
}

// The model's lines of the report: shape, experts and routing, RoPE and
// context, the tokenizer.
std::string RenderHyperparameters(const Json& hp, const Json& r) {
  std::string out;
  absl::StrAppendFormat(&out,
                        "model         n_layer %d  n_embd %d  n_head %d  n_head_kv %d  "
                        "head_dim %d  n_ff %d  n_vocab %d\n",
                        hp["n_layer"].get<int64_t>(), hp["n_embd"].get<int64_t>(),
                        hp["n_head"].get<int64_t>(), hp["n_head_kv"].get<int64_t>(),
                        hp["head_dim"].get<int64_t>(), hp["n_ff"].get<int64_t>(),
                        hp["n_vocab"].get<int64_t>());
  if (const Json* experts = FindMember(hp, "n_expert")) {
    absl::StrAppendFormat(&out,
                          "experts       %d, %d active per token, FFN width %d, weights %s; "
                          "%.2f B active layer parameters per token\n",
                          experts->get<int64_t>(), hp["n_expert_used"].get<int64_t>(),
                          hp["n_ff_exp"].get<int64_t>(),
                          hp["expert_weights_norm"].get<bool>() ? "renormalised" : "as routed",
                          hp["active_layer_params"].get<int64_t>() / 1e9);
  }
  if (const Json* routing = FindMember(hp, "routing")) {
    const Json& g = *routing;
    absl::StrAppendFormat(
        &out,
        "routing       %s, %d groups (%d kept), x%g, shared expert of %d, %d dense "
        "layer(s); RoPE on %d of %d dims; blocks of %d\n",
        g["score"].get<std::string>(), g["groups"].get<int64_t>(), g["groups_used"].get<int64_t>(),
        g["weights_scale"].get<double>(), g["shared_ff"].get<int64_t>(),
        g["dense_layers"].get<int64_t>(), hp["rope_dims"].get<int64_t>(),
        hp["head_dim"].get<int64_t>(), hp["block_length"].get<int64_t>());
  }
  absl::StrAppendFormat(&out,
                        "              rope %s theta %g  rms_eps %g  context %d  "
                        "shift_logits %s  output %s\n",
                        hp["rope_type"].get<std::string>(), hp["rope_theta"].get<double>(),
                        hp["rms_eps"].get<double>(), hp["n_ctx_train"].get<int64_t>(),
                        hp["shift_logits"].get<bool>() ? "yes" : "no",
                        hp["tied_output"].get<bool>() ? "tied to token_embd" : "untied");
  const Json& t = r["tokenizer"];
  absl::StrAppendFormat(&out,
                        "tokenizer     %s (pre %s), %d tokens, %d merges, bos %d eos %d eot %d "
                        "mask %d, add_bos %s, chat template %s\n",
                        t["model"].get<std::string>(), t["pre"].get<std::string>(),
                        t["vocab_size"].get<int64_t>(), t["merges"].get<int64_t>(),
                        t["bos_token_id"].get<int64_t>(), t["eos_token_id"].get<int64_t>(),
                        t["eot_token_id"].get<int64_t>(), t["mask_token_id"].get<int64_t>(),
                        t["add_bos_token"].get<bool>() ? "yes" : "no", ChatTemplateSummary(t));
  return out;
}

std::string RenderInspectReport(const Json& r) {
  std::string out;
  absl::StrAppendFormat(&out, "file          %s\n", r["file"].get<std::string>());
  absl::StrAppendFormat(&out, "format        GGUF v%d, %d bytes, alignment %d, %d metadata keys\n",
                        r["gguf_version"].get<int64_t>(), r["file_bytes"].get<int64_t>(),
                        r["alignment"].get<int64_t>(), r["n_metadata"].get<int64_t>());
  absl::StrAppendFormat(&out, "architecture  %s\n", r["architecture"].get<std::string>());
  if (const Json* h = FindMember(r, "hyperparameters")) out += RenderHyperparameters(*h, r);
  absl::StrAppendFormat(&out, "\n%-32s %-6s %-16s %12s\n", "tensor", "type", "shape", "bytes");
  for (const Json& t : r["tensors"]) {
    std::string shape;
    for (const Json& d : t["shape"]) {
      absl::StrAppend(&shape, shape.empty() ? "" : "x", d.get<int64_t>());
    }
    absl::StrAppendFormat(&out, "%-32s %-6s %-16s %12d\n", t["name"].get<std::string>(),
                          t["type"].get<std::string>(), shape, t["bytes"].get<int64_t>());
  }
  absl::StrAppendFormat(&out, "\n%-10s %8s %14s\n", "type", "tensors", "bytes");
  for (const auto& [type, e] : r["tensor_totals"].items()) {
    absl::StrAppendFormat(&out, "%-10s %8d %14d\n", type, e["count"].get<int64_t>(),
                          e["bytes"].get<int64_t>());
  }
  absl::StrAppendFormat(&out, "%-10s %8d %14d\n", "total", r["tensors"].size(),
                        r["tensor_bytes"].get<int64_t>());
  if (const Json* mem = FindMember(r, "memory")) {
    absl::StrAppendFormat(&out,
                          "\nmemory        canvas %d: file %.1f MiB + activations %.1f MiB + "
                          "logits %.1f MiB = peak about %.1f MiB\n",
                          (*mem)["canvas"].get<int64_t>(),
                          r["file_bytes"].get<int64_t>() / 1048576.0,
                          (*mem)["activation_bytes"].get<int64_t>() / 1048576.0,
                          (*mem)["logits_bytes"].get<int64_t>() / 1048576.0,
                          (*mem)["peak_bytes_estimate"].get<int64_t>() / 1048576.0);
  }
  const Json& compat = r["compatibility"];
  if (compat["can_run"].get<bool>()) {
    out += "\ncompatible    yes: this build can run this file\n";
  } else {
    out += "\ncompatible    no: the loader refuses this file:\n";
    for (const Json& p : compat["problems"]) {
      absl::StrAppendFormat(&out, "  - %s\n", PrintableText(p.get<std::string>()));
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
  const std::string text =
      flags->Has("json") ? DumpJson(*report, 2) + "\n" : RenderInspectReport(*report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace dllm
