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

// The exact cache of a prompt-causal model (DiffusionGemma): prompt rows
// read only the prompt before them, so once computed into the cache they
// never change. The first step computes the whole canvas through the cache;
// each later one computes the rows from the first prompt row not yet
// encoded (after a canvas joins the prompt, that canvas) to the end. Same
// bits as computing everything (mask_forward_test,
// diffusion_gemma_forward_test).
class PromptCache : public CachePolicy {
 public:
  CachePlan Plan(const CanvasView& view, std::span<const int32_t>) const override {
    return {{encoded_, view.length}, true, encoded_ == 0 ? CacheUse::kRefill : CacheUse::kRead};
  }
  void OnForward(const CanvasView& view, const CachePlan& plan) override {
    if (plan.use == CacheUse::kRefill) ++refreshes_;
    encoded_ = view.prompt_len;
  }
  // A committed prompt row cannot change; canvas rows are always computed.
  void OnCommit(const CanvasView&, std::span<const int32_t>) override {}
  void OnRewind() override { encoded_ = 0; }
  int refreshes() const override { return refreshes_; }

 private:
  int32_t encoded_ = 0;  // prompt rows [0, encoded_) are in the cache
  int refreshes_ = 0;
};

// The exact cache of a block-causal model (LLaDA2): a row reads only its
// own block and the blocks before it, so a finished block's keys and
// values never change. Each step computes the current block and any
// finished block not yet encoded since its tokens became final (the block
// just finished, whose last step changed it; at the first step the prompt's
// blocks), reading everything before them from the cache. Same logits as
// computing the window whole (llada2_forward_test).
class BlockCache : public CachePolicy {
 public:
  CachePlan Plan(const CanvasView& view, std::span<const int32_t>) const override {
    const int32_t begin = std::min(encoded_, view.block_begin);
    return {{begin, view.length}, true, begin == 0 ? CacheUse::kRefill : CacheUse::kRead};
  }
  void OnForward(const CanvasView& view, const CachePlan& plan) override {
    if (plan.use == CacheUse::kRefill) ++refreshes_;
    // The blocks before the current one went through with final tokens.
    encoded_ = view.block_begin;
  }
  // Commits land on masked positions: the current block, always computed,
  // or a later one, not yet encoded.
  void OnCommit(const CanvasView&, std::span<const int32_t>) override {}
  void OnRewind() override { encoded_ = 0; }
  int refreshes() const override { return refreshes_; }

 private:
  int32_t encoded_ = 0;  // rows [0, encoded_) hold final tokens' keys and values
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
      if (block_causal) return std::make_unique<BlockCache>();
      return std::make_unique<PromptCache>();
  }
  return std::make_unique<NoCache>();
}

}  // namespace dllm
