#include "engine/session/cache_policy.h"

#include <algorithm>

#include "engine/model/model_config.h"

namespace dllm {

const char* CacheUseName(CacheUse use) {
  switch (use) {
    case CacheUse::kRefill:
      return "full";
    case CacheUse::kRead:
      return "cached";
    case CacheUse::kNone:
      break;
  }
  return "none";
}

namespace {

RowRange WholeCanvas(const CanvasView& view) { return {0, view.length}; }

// Exact decoding: every step computes the whole canvas, no cache.
class NoCache : public CachePolicy {
 public:
  CachePlan Plan(const CanvasView& view, std::span<const int32_t>) const override {
    return {WholeCanvas(view), false, CacheUse::kNone};
  }
  void OnForward(const CanvasView&, const CachePlan&) override {}
  void OnCommit(const CanvasView&, std::span<const int32_t>) override {}
  void OnRewind() override {}
  int refreshes() const override { return 0; }
};

// Fast-dLLM's approximate caches. A block's first step, every
// `refresh_steps`-th step after it, and the first step after anything that
// makes the cache stale compute the whole canvas and refill it; the other
// steps of the block compute only
//   prefix: [block start, canvas end), reading the prompt and the finished
//           blocks from the cache;
//   dual:   [block start, block end), reading the rest from the cache (the
//           suffix as the block's last full step left it).
// Dream's family has no blocks: its one block is the whole generated
// region, so prefix and dual both cache the prompt. Under the logit shift
// (Dream, RND1) position p is scored by row p - 1, so a cached step also
// computes the row just before the block: that keeps the official sampler's
// schedule and rows unchanged (Fast-dLLM instead commits the block's first
// position at its start, which changes the schedule). A rewind, or a commit
// of a position outside the rows a cached step computes, makes the cache
// stale.
class FastDllmCache : public CachePolicy {
 public:
  FastDllmCache(bool dual, int refresh_steps) : dual_(dual), refresh_steps_(refresh_steps) {}

  CachePlan Plan(const CanvasView& view, std::span<const int32_t> logit_rows) const override {
    const RowRange part = CachedRows(view);
    const bool whole = !valid_ || block_ != view.block ||
                       (refresh_steps_ > 0 && steps_since_full_ >= refresh_steps_) ||
                       logit_rows.front() < part.begin || logit_rows.back() >= part.end;
    if (whole) return {WholeCanvas(view), true, CacheUse::kRefill};
    return {part, true, CacheUse::kRead};
  }

  void OnForward(const CanvasView& view, const CachePlan& plan) override {
    if (plan.use == CacheUse::kRefill) {
      valid_ = true;
      block_ = view.block;
      steps_since_full_ = 0;
      ++refreshes_;
    }
    ++steps_since_full_;
  }

  void OnCommit(const CanvasView& view, std::span<const int32_t> positions) override {
    // A token the next cached step would not recompute leaves stale keys.
    const RowRange part = CachedRows(view);
    for (int32_t p : positions) {
      if (p < part.begin || p >= part.end) valid_ = false;
    }
  }

  void OnRewind() override { valid_ = false; }
  int refreshes() const override { return refreshes_; }

 private:
  // The canvas rows a cached step of the current block computes.
  RowRange CachedRows(const CanvasView& view) const {
    const int32_t begin = view.block_begin;
    const int32_t end = dual_ ? begin + view.block_length : view.length;
    // Under the shift the block's first position is scored by the row before.
    return {std::max(0, PredictingRow(view.shift_logits, begin)), end};
  }

  bool dual_;
  int refresh_steps_;
  bool valid_ = false;  // the cache holds a refill of block `block_`
  int block_ = -1;
  int steps_since_full_ = 0;  // forwards since that refill
  int refreshes_ = 0;
};

// The exact caches: a row's keys and values are final once no row it
// reads can change. Prompt-causal (DiffusionGemma): prompt rows read only
// the prompt before them, so the prompt (and each finished canvas, as it
// joins the prompt) is final. Block-causal (LLaDA2): a row reads its own
// block and those before it, so every block before the current one is
// final once its last step has run. The first step computes the whole
// canvas through the cache; each later one computes from the first final
// row not yet encoded (a canvas just joined, the block just finished) to
// the end, reading the rest from the cache. Same bits as computing
// everything (mask_forward_test, diffusion_gemma_forward_test,
// llada2_forward_test).
class ExactCache : public CachePolicy {
 public:
  explicit ExactCache(bool block_causal) : block_causal_(block_causal) {}
  CachePlan Plan(const CanvasView& view, std::span<const int32_t>) const override {
    const int32_t begin = std::min(encoded_, FinalEnd(view));
    return {{begin, view.length}, true, begin == 0 ? CacheUse::kRefill : CacheUse::kRead};
  }
  void OnForward(const CanvasView& view, const CachePlan& plan) override {
    if (plan.use == CacheUse::kRefill) ++refreshes_;
    encoded_ = FinalEnd(view);
  }
  // Commits land on rows that are not final: the canvas, or the current
  // block or a later one, always computed when they are read.
  void OnCommit(const CanvasView&, std::span<const int32_t>) override {}
  void OnRewind() override { encoded_ = 0; }
  int refreshes() const override { return refreshes_; }

 private:
  // Where the rows whose keys can no longer change end.
  int32_t FinalEnd(const CanvasView& view) const {
    return block_causal_ ? view.block_begin : view.prompt_len;
  }

  bool block_causal_;
  int32_t encoded_ = 0;  // rows [0, encoded_) hold final keys and values
  int refreshes_ = 0;
};

}  // namespace

std::unique_ptr<CachePolicy> MakeCachePolicy(CacheMode mode, int refresh_steps, bool block_causal) {
  switch (mode) {
    case CacheMode::kNone:
    case CacheMode::kSentinel:
      break;
    case CacheMode::kPrefix:
      return std::make_unique<FastDllmCache>(/*dual=*/false, refresh_steps);
    case CacheMode::kDual:
      return std::make_unique<FastDllmCache>(/*dual=*/true, refresh_steps);
    case CacheMode::kExact:
      return std::make_unique<ExactCache>(block_causal);
  }
  return std::make_unique<NoCache>();
}

}  // namespace dllm
