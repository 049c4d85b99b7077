#include "service/cli/eval_scores.h"

#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/model/forward.h"
#include "engine/sampler/remasking.h"
#include "engine/session/denoise_session.h"

namespace dllm {

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

namespace {

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
  DLLM_ASSIGN_OR_RETURN(
      std::vector<int32_t> positions,
      Ids(*listed, static_cast<int32_t>(out.tokens.size()), where + ".masks." + ratio));
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  for (int32_t p : positions) {
    const int32_t row = PredictingRow(c.shift_logits, p);
    if (row < 0) continue;  // nothing predicts position 0 of a shifted model
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

// The masked-token scores of one ratio over every window: the model's
// logits through `pass`, the baseline's through `base_pass` (may be null).
absl::Status ScoreRatio(ForwardPass& pass, ForwardPass* base_pass, const Json& list,
                        const std::string& ratio, const ModelConfig& c, MaskedTokenScore* score) {
  const size_t v = static_cast<size_t>(c.n_vocab);
  std::vector<float> logits, base_logits;
  double ce = 0, kl = 0;
  int hits = 0;
  for (size_t w = 0; w < list.size(); ++w) {
    DLLM_ASSIGN_OR_RETURN(const Canvas canvas,
                          MakeCanvas(list[w], ratio, c, absl::StrCat("windows[", w, "]")));
    DLLM_RETURN_IF_ERROR(Logits(pass, canvas, &logits, c.n_vocab));
    if (base_pass != nullptr) {
      DLLM_RETURN_IF_ERROR(Logits(*base_pass, canvas, &base_logits, c.n_vocab));
    }
    for (size_t i = 0; i < canvas.positions.size(); ++i) {
      const std::span<const float> row(logits.data() + i * v, v);
      const double lse = LogSumExp(row);
      ce += lse - static_cast<double>(row[static_cast<size_t>(canvas.truth[i])]);
      // The argmax rule of the samplers: the lowest id among equal maxima.
      const size_t best =
          static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
      hits += static_cast<int32_t>(best) == canvas.truth[i];
      if (base_pass != nullptr) {
        kl += KlDivergence(std::span<const float>(base_logits.data() + i * v, v), row);
      }
    }
    score->positions += static_cast<int>(canvas.positions.size());
  }
  if (score->positions > 0) {
    score->cross_entropy = ce / score->positions;
    score->top1 = static_cast<double>(hits) / score->positions;
    if (base_pass != nullptr) score->kl = kl / score->positions;
  }
  return absl::OkStatus();
}

// The longest window's tokens: the forward passes' canvas.
int LongestWindow(const Json& list) {
  int max_len = 0;
  for (const Json& w : list) {
    const Json* t = FindMember(w, "tokens");
    if (t != nullptr && t->is_array()) max_len = std::max(max_len, static_cast<int>(t->size()));
  }
  return max_len;
}

// A window's span: its own infill {start, end}, or the task's span in its
// middle; INVALID_ARGUMENT when it is not inside the window after its first
// token.
absl::StatusOr<std::pair<int64_t, int64_t>> WindowSpan(const Json& infill, int64_t n,
                                                       const InfillTask& task,
                                                       const std::string& where) {
  int64_t start = infill["start"].is_number_integer() ? infill["start"].get<int64_t>() : -1;
  int64_t end = infill["end"].is_number_integer() ? infill["end"].get<int64_t>() : -1;
  if (task.span > 0) {  // the middle of the window instead
    start = (n - task.span) / 2;
    end = start + task.span;
  }
  if (!(start >= 1 && start < end && end <= n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".infill: [", start, ", ", end, ") is not a span inside [1, ", n, ")"));
  }
  return std::pair{start, end};
}

// One window's infill: the engine's infill canvas (the window's tokens
// before the span, span masks, the rest of the window as the suffix) run to
// the end; the tokens it got right.
absl::StatusOr<int> FillWindow(const std::shared_ptr<const Model>& model, const Json& window,
                               const std::string& where, const SamplerConfig& base,
                               const CachingOptions& caching, const InfillTask& task,
                               InfillScore* score) {
  const Json* tokens_json = FindMember(window, "tokens");
  const Json* infill = FindMember(window, "infill");
  if (tokens_json == nullptr || infill == nullptr || !infill->is_object() ||
      !infill->contains("start") || !infill->contains("end")) {
    return absl::InvalidArgumentError(where + ": needs tokens and infill {start, end}");
  }
  DLLM_ASSIGN_OR_RETURN(const std::vector<int32_t> tokens,
                        Ids(*tokens_json, model->config().n_vocab, where + ".tokens"));
  DLLM_ASSIGN_OR_RETURN(const auto span_at,
                        WindowSpan(*infill, static_cast<int64_t>(tokens.size()), task, where));
  const auto [start, end] = span_at;
  SamplerConfig config = base;
  const int span = static_cast<int>(end - start);
  config.gen_length = span;
  config.steps = std::clamp(static_cast<int>(std::lround(span * task.steps_per_token)), 1, span);
  config.block_length = task.block_length == kInfillBlocksAuto
                            ? InfillBlockLength(span, config.steps)
                            : task.block_length;
  CanvasInput input(std::vector<int32_t>(tokens.begin(), tokens.begin() + start),
                    std::vector<int32_t>(tokens.begin() + end, tokens.end()));
  DLLM_ASSIGN_OR_RETURN(std::unique_ptr<DenoiseSession> session,
                        DenoiseSession::Create(model, config, std::move(input), caching));
  while (!session->done()) {
    DLLM_ASSIGN_OR_RETURN(const StepReport step, session->Advance());
    score->forward_steps += step.forward_passes > 0 ? 1 : 0;
    score->full_steps += step.cache_use == CacheUse::kRefill ? 1 : 0;
  }
  const std::span<const int32_t> canvas = session->canvas();
  int ok = 0;
  for (int64_t p = start; p < end; ++p) {
    ok += canvas[static_cast<size_t>(p)] == tokens[static_cast<size_t>(p)];
  }
  score->tokens += span;
  ++score->spans;
  return ok;
}

// The windows array of a windows file.
absl::StatusOr<const Json*> WindowList(const Json& windows) {
  const Json* list = FindMember(windows, "windows");
  if (list == nullptr || !list->is_array() || list->empty()) {
    return absl::InvalidArgumentError("windows: no \"windows\" array");
  }
  return list;
}

}  // namespace

absl::StatusOr<std::map<std::string, MaskedTokenScore>> EvaluateMaskedTokens(
    const std::shared_ptr<const Model>& model, const std::shared_ptr<const Model>& baseline,
    const Json& windows, const std::vector<std::string>& ratios, int threads) {
  const ModelConfig& c = model->config();
  if (baseline != nullptr && baseline->config().n_vocab != c.n_vocab) {
    return absl::InvalidArgumentError("--baseline: its vocabulary differs from the model's");
  }
  DLLM_ASSIGN_OR_RETURN(const Json* list, WindowList(windows));
  std::map<std::string, MaskedTokenScore> out;
  tbb::task_arena arena(threads);
  absl::Status status;
  arena.execute([&] {
    const int max_len = LongestWindow(*list);
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
    for (const std::string& ratio : ratios) {
      status = ScoreRatio(**pass, base_pass.get(), *list, ratio, c, &out[ratio]);
      if (!status.ok()) return;
    }
  });
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<InfillScore> EvaluateInfill(const std::shared_ptr<const Model>& model,
                                           const Json& windows, const SamplerConfig& base,
                                           const CachingOptions& caching, const InfillTask& task,
                                           int threads) {
  DLLM_ASSIGN_OR_RETURN(const Json* list, WindowList(windows));
  InfillScore score;
  int exact = 0, right = 0;
  tbb::task_arena arena(threads);
  absl::Status status;
  arena.execute([&] {
    for (size_t w = 0; w < list->size() && status.ok(); ++w) {
      const int tokens_before = score.tokens;
      absl::StatusOr<int> ok = FillWindow(model, (*list)[w], absl::StrCat("windows[", w, "]"), base,
                                          caching, task, &score);
      if (!ok.ok()) {
        status = ok.status();
        return;
      }
      right += *ok;
      exact += *ok == score.tokens - tokens_before;  // the whole span
    }
  });
  if (!status.ok()) return status;
  score.exact_match = score.spans > 0 ? static_cast<double>(exact) / score.spans : 0;
  score.token_accuracy = score.tokens > 0 ? static_cast<double>(right) / score.tokens : 0;
  return score;
}

}  // namespace dllm
