// CachePolicy: how a session's steps use their sequences' K/V caches. Before
// each step's forward it plans which canvas rows the forward computes and
// whether they read the cache; it then hears of the forward that ran, of
// tokens written outside a step (Commit) and of a rewind, and keeps what it
// needs to plan the next step. DenoiseSession owns the caches and the loop;
// the policy owns the rules, so a new kind of cache is a new policy and no
// branch in the session.
//
// Today's policies: none (exact decoding: every step computes the whole
// canvas), Fast-dLLM's prefix / dual caches with refresh (approximate,
// opt-in) and the exact caches: a prompt-causal model's (DiffusionGemma:
// the prompt, and each finished canvas, encoded once) and a block-causal
// model's (LLaDA2: each block encoded once its tokens are final).
#ifndef DLLM_ENGINE_SESSION_CACHE_POLICY_H_
#define DLLM_ENGINE_SESSION_CACHE_POLICY_H_

#include <cstdint>
#include <memory>
#include <span>

#include "engine/sampler/sampler_config.h"

namespace dllm {

// How a step used the session's K/V cache: none (exact decoding, or a step
// that ran no forward), refilled it (computed the whole canvas), or read it
// (computed only some rows).
enum class CacheUse { kNone, kRefill, kRead };
// "none", "full" (refilled), "cached" (read): the step kinds' names in
// `dllm generate --json` and the metrics' `step` label.
const char* CacheUseName(CacheUse use);

// Canvas rows [begin, end).
struct RowRange {
  int32_t begin = 0, end = 0;
};

// Where the session is, as a policy plans from it.
struct CanvasView {
  int32_t length = 0;  // canvas positions the step reads (Denoiser::window_end)
  int32_t prompt_len = 0;
  int block = 0;         // the sampler's current block
  int block_length = 0;  // its effective block length
  // Where the current block starts: prompt_len + block x block_length, or
  // (block-causal, LLaDA2) block x block_length.
  int32_t block_begin = 0;
  bool shift_logits = false;  // position p is predicted by row p - 1
};

// One step's forward as a policy planned it.
struct CachePlan {
  RowRange rows;           // the canvas rows the forward computes
  bool use_cache = false;  // the sequences read the rows it does not compute from their caches
  CacheUse use = CacheUse::kNone;
};

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  // The forward of a step that needs logits for `logit_rows` (canvas rows,
  // ascending, non-empty): its rows always include them.
  virtual CachePlan Plan(const CanvasView& view, std::span<const int32_t> logit_rows) const = 0;
  // The forward `plan` described ran to the end (a failed one is not reported).
  virtual void OnForward(const CanvasView& view, const CachePlan& plan) = 0;
  // Tokens were written at canvas `positions` outside a step.
  virtual void OnCommit(const CanvasView& view, std::span<const int32_t> positions) = 0;
  // The canvas went back to an earlier state.
  virtual void OnRewind() = 0;
  // Forwards that refilled the caches (computed the whole canvas through them).
  virtual int refreshes() const = 0;
};

// The policy `mode` asks for; `refresh_steps` as SamplerConfig says. The
// exact cache is the prompt cache, or for a block-causal model
// (`block_causal`) the block cache.
std::unique_ptr<CachePolicy> MakeCachePolicy(CacheMode mode, int refresh_steps,
                                             bool block_causal = false);

}  // namespace dllm

#endif  // DLLM_ENGINE_SESSION_CACHE_POLICY_H_
