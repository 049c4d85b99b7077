// One forward pass of a diffusion LM over a ForwardBatch: the computed rows
// of every sequence stacked for the GEMMs, each layer run as its
// LayerConfig says (its attention, then the FFN of its kind), each sequence
// attending over its own canvas as its mask allows (its own rows, or its
// KvCache for the rows not computed), logits only for the rows asked for.
// A `ForwardPass` owns one Activations block, sized by a row budget, and
// the RoPE tables; Run() allocates nothing for batches of up to 16
// sequences within the budget. A row's result depends on its own sequence
// only: not on the other sequences of the batch, their number or order,
// the row budget or the thread count (the batch-invariance tests hold it).
#ifndef DLLM_ENGINE_MODEL_FORWARD_H_
#define DLLM_ENGINE_MODEL_FORWARD_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/forward_batch.h"
#include "engine/model/model.h"

namespace dllm {

// Wall time per kind of work, summed over layers (seconds). Concurrent
// projections (q/k/v, gate/up) count once; kinds never overlap, so the
// parts add up to `total` less scheduling overhead.
struct ForwardStats {
  double embed = 0;
  double norm = 0;         // RMSNorms (attention, FFN, output)
  double projections = 0;  // q, k, v, o GEMMs plus bias and RoPE, and the K/V cache writes
  double attention = 0;
  double ffn = 0;   // gate, up, SwiGLU, down (MoE: routing and the experts too)
  double head = 0;  // output projection to the vocabulary
  double total = 0;
  int64_t rows = 0;  // canvas rows computed, over all sequences

  ForwardStats& operator+=(const ForwardStats& o) {
    embed += o.embed, norm += o.norm, projections += o.projections;
    attention += o.attention, ffn += o.ffn, head += o.head, total += o.total;
    rows += o.rows;
    return *this;
  }
};

// The kinds of work ForwardStats times, by the one name each has wherever
// it is reported: the per-step timings of Generate's stream, `dllm bench`'s
// op split and the `op` label of dllm_op_duration_seconds.
struct ForwardOp {
  const char* name;
  double ForwardStats::*seconds;
};
inline constexpr std::array<ForwardOp, 6> kForwardOps = {
    {{"embed", &ForwardStats::embed},
     {"norm", &ForwardStats::norm},
     {"projections", &ForwardStats::projections},
     {"attention", &ForwardStats::attention},
     {"ffn", &ForwardStats::ffn},
     {"head", &ForwardStats::head}}};

// What a forward pass checks between layers, on the calling thread: first
// `poll` (when set), then `cancel`; a set `cancel` ends the pass with
// CANCELLED. The server's poll ends other requests' cancellations and
// deadlines while this one runs, and sets `cancel` when this request's own
// deadline passes, so neither waits behind a step.
struct LayerCheck {
  const std::atomic<bool>* cancel = nullptr;
  std::function<void()> poll;
};

// The most a pass takes: rows computed over all sequences, and canvas
// positions any one sequence may have (its keys and RoPE positions).
// `head_stage_rows` sizes a buffer the output head writes through when the
// sequences' logits do not lie one after the other in memory (a batch of
// different requests): it then runs once per that many rows instead of
// once per sequence. 0: no buffer (one head GEMM per sequence in that case).
struct ForwardLimits {
  int max_rows = 0;
  int max_positions = 0;
  int head_stage_rows = 0;
};

class ForwardPass {
 public:
  // Allocates the activations and RoPE tables for `limits` (a canvas of
  // `max_tokens` computed whole: both limits `max_tokens`). Call from the
  // tbb::task_arena that will call Run().
  static absl::StatusOr<std::unique_ptr<ForwardPass>> Create(std::shared_ptr<const Model> model,
                                                             ForwardLimits limits);
  static absl::StatusOr<std::unique_ptr<ForwardPass>> Create(std::shared_ptr<const Model> model,
                                                             int max_tokens);
  // Bytes `Create(model, limits)` allocates, counting each worker thread's
  // scratch (attention stages a head's K and V over the whole canvas) once
  // for every thread that may run a task (for admission and `inspect
  // --canvas`).
  static size_t ActivationBytes(const ModelConfig& config, ForwardLimits limits);
  static size_t ActivationBytes(const ModelConfig& config, int max_tokens);

  ~ForwardPass();

  // Runs the model over `batch` and writes each sequence's logits (its
  // logit rows, unshifted, n_vocab floats a row) to its `logits`. A
  // sequence whose `stop` is set at a layer boundary is dropped there (see
  // SequenceInput); CANCELLED when `check` stops the pass (between layers)
  // or every sequence was dropped; INVALID_ARGUMENT for a malformed batch,
  // naming the sequence and what is wrong. One thread at a time.
  absl::Status Run(const ForwardBatch& batch, const LayerCheck* check = nullptr,
                   ForwardStats* stats = nullptr);
  // One sequence, computed whole, no cache: logits for `logit_rows`
  // (ascending, unique) of `tokens`.
  absl::Status Run(std::span<const int32_t> tokens, std::span<const int32_t> logit_rows,
                   float* logits, const LayerCheck* check = nullptr, ForwardStats* stats = nullptr);

  const ForwardLimits& limits() const;
  size_t activation_bytes() const;  // ActivationBytes(config, limits())

 private:
  struct Impl;
  explicit ForwardPass(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_FORWARD_H_
