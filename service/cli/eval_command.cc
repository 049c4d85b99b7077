#include "service/cli/eval_command.h"

#include <tbb/task_arena.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/base/flags.h"
#include "engine/base/status_macros.h"
#include "engine/model/forward.h"
#include "engine/model/isa_option.h"
#include "engine/parallel/cpu_topology.h"
#include "engine/sampler/remasking.h"

namespace dllm {
namespace {

int Fail(const absl::Status& s) { return FailCommand("eval", s); }

constexpr char kEvalUsage[] =
    "usage: dllm eval --model M --windows FILE [--baseline F32.gguf] [--ratios 0.15,0.5,0.9]\n"
    "         [--json OUT] [--threads N] [--isa auto|scalar|avx2|avx512|amx]\n"
    "  masked-token cross-entropy and top-1 accuracy on held-out windows (the format of\n"
    "  shared/reference/quality/windows.json); --baseline adds the mean KL divergence\n"
    "  from that model's logits on the same canvases\n";

// The ids of a JSON array, each checked to be a token of `model`.
absl::StatusOr<std::vector<int32_t>> Ids(const Json& array, int32_t n_vocab,
                                         const std::string& where) {
  if (!array.is_array()) return absl::InvalidArgumentError(where + ": not an array");
  std::vector<int32_t> ids;
  for (const Json& id : array) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", id.dump(), " is not a token id"));
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

// One window at one ratio: the canvas, the masked positions and the rows
// that score them.
struct Canvas {
  std::vector<int32_t> tokens;     // with the masks applied
  std::vector<int32_t> positions;  // masked, ascending
  std::vector<int32_t> truth;      // the true token at each
  std::vector<int32_t> rows;       // the logits row scoring each (ascending, unique)
};

absl::StatusOr<Canvas> MakeCanvas(const Json& window, const std::string& ratio,
                                  const ModelConfig& c, const std::string& where) {
  Canvas out;
  const Json* tokens = FindMember(window, "tokens");
  const Json* masks = FindMember(window, "masks");
  if (tokens == nullptr || masks == nullptr) {
    return absl::InvalidArgumentError(where + ": needs tokens and masks");
  }
  DLLM_ASSIGN_OR_RETURN(out.tokens, Ids(*tokens, c.n_vocab, where + ".tokens"));
  const Json* listed = FindMember(*masks, ratio);
  if (listed == nullptr) return absl::InvalidArgumentError(where + ": no masks for ratio " + ratio);
  DLLM_ASSIGN_OR_RETURN(std::vector<int32_t> positions,
                        Ids(*listed, static_cast<int32_t>(out.tokens.size()),
                            where + ".masks." + ratio));
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  for (int32_t p : positions) {
    const int32_t row = c.shift_logits ? p - 1 : p;
    if (row < 0) continue;  // nothing scores position 0 of a shifted model
    out.positions.push_back(p);
    out.truth.push_back(out.tokens[p]);
    out.rows.push_back(row);
  }
  for (int32_t p : out.positions) out.tokens[p] = c.tokens.mask;
  return out;
}

absl::Status Logits(ForwardPass& pass, const Canvas& canvas, std::vector<float>* logits,
                    int n_vocab) {
  logits->resize(canvas.rows.size() * static_cast<size_t>(n_vocab));
  return pass.Run(canvas.tokens, canvas.rows, logits->data(), nullptr, nullptr);
}

}  // namespace

absl::StatusOr<std::map<std::string, MaskedTokenScore>> EvaluateMaskedTokens(
    const std::shared_ptr<const Model>& model, const std::shared_ptr<const Model>& baseline,
    const Json& windows, const std::vector<std::string>& ratios, int threads) {
  const ModelConfig& c = model->config();
  if (baseline != nullptr && baseline->config().n_vocab != c.n_vocab) {
    return absl::InvalidArgumentError("--baseline: its vocabulary differs from the model's");
  }
  const Json* list = FindMember(windows, "windows");
  if (list == nullptr || !list->is_array() || list->empty()) {
    return absl::InvalidArgumentError("windows: no \"windows\" array");
  }
  const size_t v = static_cast<size_t>(c.n_vocab);
  std::map<std::string, MaskedTokenScore> out;
  tbb::task_arena arena(threads);
  absl::Status status;
  arena.execute([&] {
    int max_len = 0;
    for (const Json& w : *list) {
      const Json* t = FindMember(w, "tokens");
      if (t != nullptr && t->is_array()) max_len = std::max(max_len, static_cast<int>(t->size()));
    }
    absl::StatusOr<std::unique_ptr<ForwardPass>> pass = ForwardPass::Create(model, max_len);
    if (!pass.ok()) {
      status = pass.status();
      return;
    }
    std::unique_ptr<ForwardPass> base_pass;
    if (baseline != nullptr) {
      absl::StatusOr<std::unique_ptr<ForwardPass>> b = ForwardPass::Create(baseline, max_len);
      if (!b.ok()) {
        status = b.status();
        return;
      }
      base_pass = std::move(*b);
    }
    std::vector<float> logits, base_logits;
    for (const std::string& ratio : ratios) {
      MaskedTokenScore& score = out[ratio];
      double ce = 0, kl = 0;
      int hits = 0;
      for (size_t w = 0; w < list->size(); ++w) {
        absl::StatusOr<Canvas> canvas = MakeCanvas((*list)[w], ratio, c, absl::StrCat("windows[", w, "]"));
        if (!canvas.ok()) {
          status = canvas.status();
          return;
        }
        if (absl::Status s = Logits(**pass, *canvas, &logits, c.n_vocab); !s.ok()) {
          status = s;
          return;
        }
        if (base_pass != nullptr) {
          if (absl::Status s = Logits(*base_pass, *canvas, &base_logits, c.n_vocab); !s.ok()) {
            status = s;
            return;
          }
        }
        for (size_t i = 0; i < canvas->positions.size(); ++i) {
          const std::span<const float> row(logits.data() + i * v, v);
          const double lse = LogSumExp(row);
          ce += lse - static_cast<double>(row[static_cast<size_t>(canvas->truth[i])]);
          // The argmax rule of the samplers: the lowest id among equal maxima.
          const size_t best = static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
          hits += static_cast<int32_t>(best) == canvas->truth[i];
          if (base_pass != nullptr) {
            const std::span<const float> base(base_logits.data() + i * v, v);
            const double base_lse = LogSumExp(base);
            double d = 0;
            for (size_t t = 0; t < v; ++t) {
              const double lp = static_cast<double>(base[t]) - base_lse;
              d += std::exp(lp) * (lp - (static_cast<double>(row[t]) - lse));
            }
            kl += d;
          }
        }
        score.positions += static_cast<int>(canvas->positions.size());
      }
      if (score.positions > 0) {
        score.cross_entropy = ce / score.positions;
        score.top1 = static_cast<double>(hits) / score.positions;
        if (base_pass != nullptr) score.kl = kl / score.positions;
      }
    }
  });
  if (!status.ok()) return status;
  return out;
}

int RunEval(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags = ParseFlags(
      argc, argv, {"model", "windows", "baseline", "ratios", "json", "threads", "isa"}, {});
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) return PrintHelp(kEvalUsage);
  if (!flags->Has("model") || !flags->Has("windows") || !flags->positional.empty()) {
    std::fputs(kEvalUsage, stderr);
    return 2;
  }
  absl::StatusOr<int64_t> threads =
      flags->GetIntInRange("threads", ReadCpuTopology().UsableThreads(), 1, 1024);
  if (!threads.ok()) return Fail(threads.status());
  absl::StatusOr<IsaLevel> isa = ResolveIsaLevel(flags->Get("isa"));
  if (!isa.ok()) return Fail(isa.status());
  const std::vector<std::string> ratios =
      absl::StrSplit(flags->Get("ratios", "0.15,0.5,0.9"), ',', absl::SkipEmpty());
  absl::StatusOr<Json> windows = ReadJsonFile(flags->Get("windows"));
  if (!windows.ok()) return Fail(windows.status());
  ModelOptions options;
  options.isa = *isa;
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(flags->Get("model"), options);
  if (!model.ok()) return Fail(model.status());
  std::shared_ptr<const Model> baseline;
  if (flags->Has("baseline")) {
    absl::StatusOr<std::shared_ptr<const Model>> b = Model::Load(flags->Get("baseline"), options);
    if (!b.ok()) return Fail(b.status());
    baseline = *b;
  }
  absl::StatusOr<std::map<std::string, MaskedTokenScore>> scores =
      EvaluateMaskedTokens(*model, baseline, *windows, ratios, static_cast<int>(*threads));
  if (!scores.ok()) return Fail(scores.status());

  Json result = Json::object();
  result["model"] = flags->Get("model");
  result["windows"] = flags->Get("windows");
  if (baseline != nullptr) result["baseline"] = flags->Get("baseline");
  Json by_ratio = Json::object();
  std::printf("%-6s %8s %8s %10s %7s\n", "ratio", "CE", "top-1", "KL", "n");
  for (const std::string& ratio : ratios) {
    const MaskedTokenScore& s = scores->at(ratio);
    Json r = {{"ce", s.cross_entropy}, {"top1", s.top1}, {"n", s.positions}};
    if (s.kl >= 0) r["kl"] = s.kl;
    by_ratio[ratio] = r;
    std::printf("%-6s %8.4f %7.2f%% %10s %7d\n", ratio.c_str(), s.cross_entropy, 100 * s.top1,
                s.kl >= 0 ? absl::StrCat(s.kl).c_str() : "-", s.positions);
  }
  result["ratios"] = std::move(by_ratio);
  if (flags->Has("json")) {
    std::ofstream out(flags->Get("json"));
    out << DumpJson(result, 1) << "\n";
    if (!out) return Fail(absl::PermissionDeniedError(flags->Get("json") + ": cannot write"));
  }
  return 0;
}

}  // namespace dllm
