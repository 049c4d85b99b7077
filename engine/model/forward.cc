#include "engine/model/forward.h"

#include <tbb/blocked_range.h>
#include <tbb/blocked_range2d.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_invoke.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <ranges>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/base/stopwatch.h"
#include "engine/model/activations.h"
#include "engine/model/moe_routing.h"
#include "engine/parallel/parallel_gemm.h"
#include "engine/parallel/per_thread.h"
#include "engine/tokenizer/special_tokens.h"
#include "kernels/attention.h"
#include "kernels/dequant.h"
#include "kernels/vector_ops.h"

namespace dllm {
namespace {

using Clock = MonotonicClock;

// Runs `body` and adds its wall time to `*seconds` (when set): the one place
// the pass is timed, so the layer functions carry no timing code.
template <typename Body>
void Timed(double* seconds, Body body) {
  if (seconds == nullptr) {
    body();
    return;
  }
  const Clock::time_point start = Clock::now();
  body();
  *seconds += SecondsSince(start);
}

// Where each kind of work's time goes (null members: not timed).
struct OpClocks {
  double* norm = nullptr;
  double* projections = nullptr;
  double* attention = nullptr;
  double* ffn = nullptr;
};

// One RoPE table: cos and sin of every (position, pair) for its spec.
struct RopeTable {
  RopeSpec spec;
  std::vector<float> cos, sin;  // (max_positions, spec.dims / 2)
};

// What every layer reads that does not change from pass to pass: the model's
// widths and kernels, the RoPE tables (LayerConfig::rope indexes them) and
// the per-worker float scratch.
struct LayerContext {
  const ModelConfig* config = nullptr;
  const VectorKernels* vk = nullptr;
  AttentionFn attend = nullptr;
  std::span<const RopeTable> ropes;
  PerThread<std::vector<float>>* thread_floats = nullptr;
  float eps = 0;
};

// Self-conditioning's soft embedding (SoftEmbeddings): the rows'
// probabilities over the vocabulary, and each worker's block of dequantized
// embedding columns.
constexpr int64_t kScColumns = 256;       // a multiple of every quantization block
constexpr int64_t kScEmbeddingRows = 16;  // embedding rows added per kernel call
struct SelfConditioningScratch {
  std::vector<float> probabilities;       // (ScChunkRows, n_vocab)
  PerThread<std::vector<float>> columns;  // (kScEmbeddingRows, kScColumns) each
  // Per self-conditioned row of the batch: its previous logits and 1/temperature.
  std::vector<const float*> previous;
  std::vector<float> temp_inv;
};

// One sequence of the batch as the layers see it.
struct SequenceRows {
  const SequenceInput* input = nullptr;
  int64_t row_offset = 0;    // its first computed row in the stacked batch
  int64_t logit_offset = 0;  // its first logits row (the last layer's rows)
  bool live = true;          // false once its `stop` was seen: nothing of it is touched
};

// The batch's rows, laid out once per pass: which rows go through a layer,
// and where each sequence's keys come from.
struct BatchRows {
  std::span<const SequenceRows> sequences;
  int64_t m = 0;                             // computed rows, all sequences
  const int32_t* positions = nullptr;        // (m) RoPE position of each computed row
  int64_t m_logits = 0;                      // logits rows, all sequences
  const int32_t* logit_rows = nullptr;       // (m_logits) the computed row of each
  const int32_t* logit_positions = nullptr;  // (m_logits) its RoPE position
};

void RmsNormRows(const VectorKernels& vk, const float* x, int64_t m, int64_t n, const float* weight,
                 float eps, float* out) {
  tbb::parallel_for(int64_t{0}, m,
                    [&](int64_t r) { vk.rms_norm(x + r * n, weight, eps, n, out + r * n); });
}

// What follows a q/k/v projection, per row: the bias (may be null), the
// per-head RMSNorm (`head_norm`, may be null; MoE arches' q/k norm) and the
// rotation of each head. NORM pairs (2i, 2i+1), NEOX pairs (i, i + d/2);
// angle pos * theta^(-2i/d). Unlike the `rope` vector kernel, which computes
// its angles per call, this reads the cos/sin tables ForwardPass::Create
// builds: no sin/cos per step.
struct HeadEpilogue {
  const float* bias = nullptr;
  const float* head_norm = nullptr;
  bool unweighted_norm = false;  // a per-head RMSNorm without weight (Gemma 4's V)
  bool rotate = false;
};

// RoPE over the first spec.dims dimensions of each head (the rest pass):
// NORM pairs (2i, 2i+1), NEOX pairs (i, i + dims/2).
void BiasNormRope(const LayerContext& ctx, const LayerConfig& layer, float* x, int64_t width,
                  const int32_t* positions, int64_t m, const HeadEpilogue& e) {
  const RopeTable& rope = ctx.ropes[static_cast<size_t>(layer.rope)];
  const RopeType type = rope.spec.type;
  const int64_t head_dim = layer.head_dim;
  const int64_t half = rope.spec.dims / 2;
  tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
    float* row = x + r * width;
    if (e.bias != nullptr) {
      for (int64_t c = 0; c < width; ++c) row[c] += e.bias[c];
    }
    if (e.head_norm != nullptr || e.unweighted_norm) {
      for (int64_t h = 0; h < width / head_dim; ++h) {
        ctx.vk->rms_norm(row + h * head_dim, e.head_norm, ctx.eps, head_dim, row + h * head_dim);
      }
    }
    if (!e.rotate) return;
    const float* cs = rope.cos.data() + positions[r] * half;
    const float* sn = rope.sin.data() + positions[r] * half;
    for (int64_t h = 0; h < width / head_dim; ++h) {
      float* v = row + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = type == RopeType::kNorm ? 2 * i : i;
        const int64_t b = type == RopeType::kNorm ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[i] - x1 * sn[i];
        v[b] = x0 * sn[i] + x1 * cs[i];
      }
    }
  });
}

// Copies the computed rows' keys (or values) of every cached sequence into
// its cache at their positions, where attention reads them.
void StoreKv(const BatchRows& batch, int layer, const float* rows, int64_t kv_dim, bool values) {
  for (const SequenceRows& s : batch.sequences) {
    KvCache* cache = s.input->cache;
    if (cache == nullptr || !s.live) continue;
    float* dst = values ? cache->v(layer) : cache->k(layer);
    const int64_t n = s.input->row_end - s.input->row_begin;
    std::memcpy(dst + s.input->row_begin * kv_dim, rows + s.row_offset * kv_dim,
                sizeof(float) * static_cast<size_t>(n * kv_dim));
  }
}

// The attention shape of `layer` (n_tokens set per sequence): its rows lie
// in the activations at the layer's own widths.
AttentionShape ShapeOf(const LayerConfig& layer) {
  AttentionShape shape;
  shape.n_head = static_cast<int>(layer.n_head);
  shape.n_head_kv = static_cast<int>(layer.n_head_kv);
  shape.head_dim = static_cast<int>(layer.head_dim);
  shape.q_stride = static_cast<int>(layer.q_dim());
  shape.kv_stride = static_cast<int>(layer.kv_dim());
  shape.out_stride = static_cast<int>(layer.q_dim());
  shape.scale = layer.attn_scale;
  return shape;
}

// Attention of each sequence's query rows over the keys its mask and the
// layer's window allow. Query rows are the computed rows, or on the last
// layer the logits rows only; `q` and `out` hold them stacked in that order,
// and `positions` (stacked the same way) their canvas positions.
void Attend(const LayerContext& ctx, const LayerConfig& config, const BatchRows& batch, int layer,
            bool logits_only, const int32_t* positions, const Activations& act) {
  const int64_t kv_dim = config.kv_dim();
  const int32_t window = config.attention == AttentionKind::kSliding ? config.window : 0;
  for (const SequenceRows& s : batch.sequences) {
    const SequenceInput& in = *s.input;
    const int64_t q0 = logits_only ? s.logit_offset : s.row_offset;
    const int64_t nq =
        logits_only ? static_cast<int64_t>(in.logit_rows.size()) : in.row_end - in.row_begin;
    if (nq == 0) continue;
    if (!s.live) {
      // A dropped sequence's rows go on through the GEMMs: give them zeros
      // rather than whatever the buffer held, so they stay finite.
      std::memset(act.attn + q0 * config.q_dim(), 0,
                  sizeof(float) * static_cast<size_t>(nq * config.q_dim()));
      continue;
    }
    AttentionShape shape = ShapeOf(config);
    shape.n_tokens = static_cast<int>(in.tokens.size());
    const KeyRange* row_keys = nullptr;
    if (!ReadsWholeCanvas(in.mask, shape.n_tokens)) {
      for (int64_t i = q0; i < q0 + nq; ++i) {
        act.row_keys[i] = KeysOf(in.mask, window, positions[i], shape.n_tokens);
      }
      row_keys = act.row_keys;
    }
    const float* k = in.cache ? in.cache->k(layer) : act.k + s.row_offset * kv_dim;
    const float* v = in.cache ? in.cache->v(layer) : act.v + s.row_offset * kv_dim;
    const int64_t q_blocks = (nq + kAttnRowsPerCall - 1) / kAttnRowsPerCall;
    // One task per (head, kAttnRowsPerCall query rows): each stages its
    // head's K and V once for those rows.
    tbb::parallel_for(tbb::blocked_range2d<int64_t>(0, shape.n_head, 1, 0, q_blocks, 1),
                      [&](const tbb::blocked_range2d<int64_t>& range) {
                        std::vector<float>& scratch = ctx.thread_floats->Local();
                        for (int64_t hd = range.rows().begin(); hd != range.rows().end(); ++hd) {
                          for (int64_t b = range.cols().begin(); b != range.cols().end(); ++b) {
                            const int64_t i0 = q0 + b * kAttnRowsPerCall;
                            const int64_t i1 = std::min(q0 + nq, i0 + kAttnRowsPerCall);
                            ctx.attend(shape, act.q, k, v, act.attn, static_cast<int>(hd),
                                       static_cast<int>(i0), static_cast<int>(i1), row_keys,
                                       scratch.data());
                          }
                        }
                      });
  }
}

LinearScratch Scratch(const LayerContext& ctx, const Activations& act, XqSlot slot) {
  return {&act.xq[slot], ctx.thread_floats};
}

// Quantizes the input rows (x row rows[i], or row i, i < m) once into
// act.xq[slot] when any of `readers` is an int8 projection; Project() then
// has each int8 reader take that copy and each float one read x.
void QuantizeShared(std::initializer_list<const Linear*> readers, const float* x, int64_t ldx,
                    const int32_t* rows, int64_t m, const Activations& act, XqSlot slot) {
  for (const Linear* l : readers) {
    if (l->int8()) return ParallelQuantizeRows(x, ldx, rows, m, act.xq[slot]);
  }
}

void Project(const LayerContext& ctx, const Linear& w, const float* x, int64_t ldx,
             const int32_t* rows, int64_t m, float* y, int64_t ldy, const Activations& act,
             XqSlot slot) {
  if (w.int8()) {
    w.ApplyQuantized(act.xq[slot], m, y, ldy);
  } else {
    w.Apply(x, ldx, rows, m, y, ldy, Scratch(ctx, act, slot));
  }
}

// The gate's activation of a gated FFN.
enum class Gating { kSilu, kGelu };

// out[i] = down(act(gate(h[r])) * up(h[r])) for the rows r = rows[i] (rows
// null: r = i), i < count: a dense FFN, and one expert's (`n_ff` wide).
void GatedFfn(const LayerContext& ctx, const GatedFfnWeights& w, Gating gating, int64_t n_ff,
              const int32_t* rows, int64_t count, float* out, Activations& act) {
  const Linear &gate = *w.gate, &up = *w.up, &down = *w.down;
  const int64_t n_embd = ctx.config->n_embd;
  QuantizeShared({&gate, &up}, act.h, n_embd, rows, count, act, kXqFfnIn);
  tbb::parallel_invoke(
      [&] { Project(ctx, gate, act.h, n_embd, rows, count, act.gate, n_ff, act, kXqFfnIn); },
      [&] { Project(ctx, up, act.h, n_embd, rows, count, act.up, n_ff, act, kXqFfnIn); });
  const auto glu = gating == Gating::kSilu ? ctx.vk->swiglu : ctx.vk->geglu;
  tbb::parallel_for(int64_t{0}, count, [&](int64_t i) {
    glu(act.gate + i * n_ff, act.up + i * n_ff, n_ff, act.gate + i * n_ff);
  });
  down.Apply(act.gate, n_ff, nullptr, count, out, n_embd, Scratch(ctx, act, kXqDown));
}

// Routes the first `m` rows of `input` (the router's input, n_embd wide)
// to their experts: act.route_* and act.groups.
void Route(const LayerContext& ctx, const LayerConfig& config, const MoeWeights& w,
           const float* input, int64_t m, Activations& act) {
  const int64_t ne = config.n_expert, k = config.n_expert_used;
  w.router->Apply(input, ctx.config->n_embd, nullptr, m, act.router_logits, ne,
                  Scratch(ctx, act, kXqRows));
  const RoutingRule rule = RoutingRuleOf(config, w.expert_bias);
  for (int64_t r = 0; r < m; ++r) {
    RouteRow(act.router_logits + r * ne, ne, rule, act.route_probs, act.route_order,
             act.route_experts + r * k, act.route_weights + r * k);
  }
  GroupByExpert(act.route_experts, m, k, ne, &act.groups);
}

// act.moe_sum = sum over each routed row's k experts of weight * (the
// expert's down_scale, when set) * its gated FFN of h. Each expert runs its
// GEMMs once, over the rows routed to it (gathered by index from h); the
// weighted outputs are added to the rows' sums in expert order, so a row's
// result depends on its own routing only.
void RunExperts(const LayerContext& ctx, const LayerConfig& config, const MoeWeights& w,
                Gating gating, int64_t m, Activations& act) {
  const int64_t k = config.n_expert_used;
  const int64_t n_embd = ctx.config->n_embd;
  std::fill(act.moe_sum, act.moe_sum + m * n_embd, 0.0f);
  for (int64_t e = 0; e < config.n_expert; ++e) {
    const int64_t count = act.groups.count(e);
    if (count == 0) continue;
    const int32_t* rows_e = act.groups.rows.data() + act.groups.offset[e];
    const int32_t* slots_e = act.groups.slot.data() + act.groups.offset[e];
    GatedFfn(ctx, w.experts[static_cast<size_t>(e)], gating, config.n_ff_expert, rows_e, count,
             act.expert_out, act);
    const float* down_scale = w.down_scale != nullptr ? w.down_scale + e : nullptr;
    tbb::parallel_for(int64_t{0}, count, [&](int64_t i) {
      const int64_t r = rows_e[i];
      const float weight = act.route_weights[r * k + slots_e[i]];
      const float* src = act.expert_out + i * n_embd;
      float* dst = act.moe_sum + r * n_embd;
      if (down_scale == nullptr) {
        for (int64_t j = 0; j < n_embd; ++j) dst[j] += weight * src[j];
      } else {
        // DiffusionGemma scales the expert's output before its routing weight.
        const float scale = *down_scale;
        for (int64_t j = 0; j < n_embd; ++j) dst[j] += weight * (src[j] * scale);
      }
    });
  }
}

// The FFN kinds (FfnKind): each takes the FFN input norm of x in h (first
// `m` rows) and returns the buffer that holds its output for those rows;
// RunLayer adds it to x.

// down(silu(gate(h)) * up(h)).
float* DenseFfn(const LayerContext& ctx, const LayerConfig& config, const LayerWeights& w,
                int64_t m, Activations& act) {
  GatedFfn(ctx, w.dense, Gating::kSilu, config.n_ff, nullptr, m, act.h, act);
  return act.h;
}

// Routing of h to SwiGLU experts (RoutingRuleOf(config)), plus the shared
// expert's SwiGLU of h where the layer has one (LLaDA2).
float* MoeFfn(const LayerContext& ctx, const LayerConfig& config, const LayerWeights& w, int64_t m,
              Activations& act) {
  Route(ctx, config, w.moe, act.h, m, act);
  RunExperts(ctx, config, w.moe, Gating::kSilu, m, act);
  if (config.n_ff_shared > 0) {
    const int64_t n_embd = ctx.config->n_embd;
    GatedFfn(ctx, w.moe.shared, Gating::kSilu, config.n_ff_shared, nullptr, m, act.ffn_out, act);
    tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
      float* sum = act.moe_sum + r * n_embd;
      ctx.vk->add(sum, act.ffn_out + r * n_embd, n_embd, sum);
    });
  }
  return act.moe_sum;
}

// DiffusionGemma's: norm(dense GeGLU of h) + norm(GeGLU experts of
// norm(x)), routed by norm(x) / sqrt(n_embd) * router_input_scale, the sum
// normed again (post_ffw_norm, by RunLayer).
float* GeGluMoeFfn(const LayerContext& ctx, const LayerConfig& config, const LayerWeights& w,
                   int64_t m, Activations& act) {
  const int64_t n_embd = ctx.config->n_embd;
  const VectorKernels& vk = *ctx.vk;
  GatedFfn(ctx, w.dense, Gating::kGelu, config.n_ff, nullptr, m, act.ffn_out, act);
  RmsNormRows(vk, act.ffn_out, m, n_embd, w.dense_post_norm, ctx.eps, act.ffn_out);
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(n_embd));
  tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
    float* row = act.h + r * n_embd;
    vk.rms_norm(act.x + r * n_embd, nullptr, ctx.eps, n_embd, row);
    for (int64_t j = 0; j < n_embd; ++j) row[j] = row[j] * inv_sqrt_d * w.moe.router_input_scale[j];
  });
  Route(ctx, config, w.moe, act.h, m, act);
  RmsNormRows(vk, act.x, m, n_embd, w.experts_norm, ctx.eps, act.h);
  RunExperts(ctx, config, w.moe, Gating::kGelu, m, act);
  tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
    float* sum = act.h + r * n_embd;
    vk.rms_norm(act.moe_sum + r * n_embd, w.experts_post_norm, ctx.eps, n_embd, sum);
    vk.add(sum, act.ffn_out + r * n_embd, n_embd, sum);
  });
  return act.h;
}

// Indexed by FfnKind: a new kind adds its function here, its part to
// LayerWeights and its tensors to tensor_layout.cc; RunLayer stays as it is.
using FfnFn = float* (*)(const LayerContext&, const LayerConfig&, const LayerWeights&, int64_t,
                         Activations&);
constexpr FfnFn kFfnOfKind[] = {DenseFfn, MoeFfn, GeGluMoeFfn};

// The prompt rows' length of a sequence: rows before it are the prompt
// encoder's (DiffusionGemma), the rest the canvas's.
int32_t PromptRows(const SequenceInput& in) {
  return in.mask.kind == MaskKind::kPromptCausal ? in.mask.prompt_length : 0;
}

// x[i] *= the layer's scalar for row i's kind (LayerConfig::output_scales):
// the encoder's on prompt rows, the decoder's on canvas rows.
void ScaleOutput(const LayerWeights& w, const BatchRows& batch, bool logits_only,
                 const int32_t* positions, int64_t n_embd, float* x) {
  const float encoder = *w.encoder_output_scale, decoder = *w.output_scale;
  for (const SequenceRows& s : batch.sequences) {
    const SequenceInput& in = *s.input;
    const int64_t first = logits_only ? s.logit_offset : s.row_offset;
    const int64_t count =
        logits_only ? static_cast<int64_t>(in.logit_rows.size()) : in.row_end - in.row_begin;
    const int32_t prompt = PromptRows(in);
    tbb::parallel_for(first, first + count, [&](int64_t i) {
      const float scale = positions[i] < prompt ? encoder : decoder;
      float* row = x + i * n_embd;
      for (int64_t j = 0; j < n_embd; ++j) row[j] *= scale;
    });
  }
}

// One transformer layer over the batch's rows in `act.x`: attention as
// `config` describes it, then the FFN of its kind. With `logits_only` (the
// last layer), only the logits rows go past the key and value projections,
// and `act.x` leaves compacted to them, in order.
void RunLayer(const LayerContext& ctx, const LayerConfig& config, const LayerWeights& weights,
              int layer, const BatchRows& batch, bool logits_only, Activations& act,
              const OpClocks& clocks) {
  const AttentionWeights& w = weights.attention;
  const int64_t n_embd = ctx.config->n_embd, q_dim = config.q_dim(), kv_dim = config.kv_dim();
  const int64_t m = batch.m;
  const int64_t m_out = logits_only ? batch.m_logits : m;
  const int32_t* out_rows = logits_only ? batch.logit_rows : nullptr;
  const int32_t* out_positions = logits_only ? batch.logit_positions : batch.positions;

  Timed(clocks.norm, [&] { RmsNormRows(*ctx.vk, act.x, m, n_embd, w.norm, ctx.eps, act.h); });
  // V's bias and norm (no RoPE), then its cache write.
  const auto value_epilogue = [&] {
    BiasNormRope(ctx, config, act.v, kv_dim, nullptr, m, {w.bv, nullptr, config.value_norm, false});
    StoreKv(batch, layer, act.v, kv_dim, /*values=*/true);
  };
  // wv is absent where V is K.
  const Linear* wv = config.value_is_key ? w.wk.get() : w.wv.get();
  Timed(clocks.projections, [&] {
    // q, k and v read one quantization of h; on the last layer q reads only
    // the logits rows, quantized apart.
    if (logits_only) {
      QuantizeShared({w.wk.get(), wv}, act.h, n_embd, nullptr, m, act, kXqAttnIn);
    } else {
      QuantizeShared({w.wq.get(), w.wk.get(), wv}, act.h, n_embd, nullptr, m, act, kXqAttnIn);
    }
    tbb::parallel_invoke(
        [&] {
          if (logits_only) {
            w.wq->Apply(act.h, n_embd, out_rows, m_out, act.q, q_dim, Scratch(ctx, act, kXqRows));
          } else {
            Project(ctx, *w.wq, act.h, n_embd, nullptr, m, act.q, q_dim, act, kXqAttnIn);
          }
          BiasNormRope(ctx, config, act.q, q_dim, out_positions, m_out,
                       {w.bq, w.q_norm, false, true});
        },
        [&] {
          Project(ctx, *w.wk, act.h, n_embd, nullptr, m, act.k, kv_dim, act, kXqAttnIn);
          if (config.value_is_key) {
            std::memcpy(act.v, act.k, sizeof(float) * static_cast<size_t>(m * kv_dim));
            value_epilogue();
          }
          BiasNormRope(ctx, config, act.k, kv_dim, batch.positions, m,
                       {w.bk, w.k_norm, false, true});
          StoreKv(batch, layer, act.k, kv_dim, /*values=*/false);
        },
        [&] {
          if (config.value_is_key) return;
          Project(ctx, *w.wv, act.h, n_embd, nullptr, m, act.v, kv_dim, act, kXqAttnIn);
          value_epilogue();
        });
  });
  Timed(clocks.attention,
        [&] { Attend(ctx, config, batch, layer, logits_only, out_positions, act); });
  Timed(clocks.projections, [&] {
    w.wo->Apply(act.attn, q_dim, nullptr, m_out, act.h, n_embd, Scratch(ctx, act, kXqO));
    if (config.post_norms) RmsNormRows(*ctx.vk, act.h, m_out, n_embd, w.post_norm, ctx.eps, act.h);
    // x[r] = x[out_rows[r]] + h[r]. On the last layer this compacts the
    // residual to the first m_out rows; summing into h first keeps the
    // parallel loop free of reads of rows another task is writing.
    tbb::parallel_for(int64_t{0}, m_out, [&](int64_t r) {
      float* sum = act.h + r * n_embd;
      ctx.vk->add(sum, act.x + (out_rows ? out_rows[r] : r) * n_embd, n_embd, sum);
    });
    tbb::parallel_for(int64_t{0}, m_out, [&](int64_t r) {
      std::memcpy(act.x + r * n_embd, act.h + r * n_embd, sizeof(float) * n_embd);
    });
  });
  Timed(clocks.norm,
        [&] { RmsNormRows(*ctx.vk, act.x, m_out, n_embd, weights.ffn_norm, ctx.eps, act.h); });
  Timed(clocks.ffn, [&] {
    float* out = kFfnOfKind[static_cast<int>(config.ffn)](ctx, config, weights, m_out, act);
    if (config.post_norms) {
      RmsNormRows(*ctx.vk, out, m_out, n_embd, weights.ffn_post_norm, ctx.eps, out);
    }
    tbb::parallel_for(int64_t{0}, m_out, [&](int64_t r) {
      ctx.vk->add(act.x + r * n_embd, out + r * n_embd, n_embd, act.x + r * n_embd);
    });
    if (config.output_scales) {
      ScaleOutput(weights, batch, logits_only, out_positions, n_embd, act.x);
    }
  });
}

// Why `batch` cannot run within `limits` on a model of `c`, or OK.
absl::Status CheckBatch(const ForwardBatch& batch, const ModelConfig& c,
                        const ForwardLimits& limits) {
  if (batch.sequences.empty()) return absl::InvalidArgumentError("forward batch has no sequence");
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const SequenceInput& s = batch.sequences[i];
    const int64_t L = static_cast<int64_t>(s.tokens.size());
    const std::string where = absl::StrCat("sequence ", i, ": ");
    if (L < 1 || L > limits.max_positions) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "canvas of ", L, " tokens exceeds the buffers for ", limits.max_positions));
    }
    if (s.row_begin < 0 || s.row_end > L || s.row_begin >= s.row_end) {
      return absl::InvalidArgumentError(absl::StrCat(where, "computed rows [", s.row_begin, ", ",
                                                     s.row_end,
                                                     ") are empty or outside the canvas of ", L));
    }
    if (s.cache == nullptr && (s.row_begin != 0 || s.row_end != L)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "without a K/V cache every row of the canvas must be computed"));
    }
    if (s.cache != nullptr && s.cache->n_pos() < L) {
      return absl::InvalidArgumentError(absl::StrCat(where, "K/V cache of ", s.cache->n_pos(),
                                                     " positions does not fit a canvas of ", L));
    }
    if (s.cache != nullptr &&
        !std::ranges::equal(s.cache->layer_widths(), c.layers, {}, {}, &LayerConfig::kv_dim)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "K/V cache's layer widths are not the model's"));
    }
    if (s.mask.kind == MaskKind::kBlockCausal && s.mask.block_length < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "block-causal mask with block length ", s.mask.block_length));
    }
    if (s.mask.kind == MaskKind::kPromptCausal &&
        (s.mask.prompt_length < 0 || s.mask.prompt_length > L)) {
      return absl::InvalidArgumentError(absl::StrCat(where, "prompt-causal mask's prompt of ",
                                                     s.mask.prompt_length,
                                                     " positions is outside the canvas of ", L));
    }
    if (!s.self_conditioning.empty()) {
      if (!c.self_conditioning) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "self-conditioning input, but ", ArchName(c.arch), " has no self-conditioning"));
      }
      const int64_t canvas = L - PromptRows(s);
      if (static_cast<int64_t>(s.self_conditioning.size()) != canvas * c.n_vocab) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "self-conditioning input of ", s.self_conditioning.size(),
            " floats; expected the ", canvas, " canvas rows x ", c.n_vocab, " vocabulary"));
      }
      if (!(s.self_conditioning_temp_inv > 0) || !std::isfinite(s.self_conditioning_temp_inv)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "self-conditioning inverse temperature ",
                         s.self_conditioning_temp_inv, " is not positive"));
      }
    }
    if (!s.logit_rows.empty() && s.logits == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, s.logit_rows.size(), " logit rows but nowhere to write them"));
    }
    for (size_t r = 0; r < s.logit_rows.size(); ++r) {
      const int32_t p = s.logit_rows[r];
      if (p < s.row_begin || p >= s.row_end || (r > 0 && p <= s.logit_rows[r - 1])) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "logit row ", p, " at index ", r, " is outside the computed rows [",
                         s.row_begin, ", ", s.row_end, ") or not ascending (canvas ", L, ")"));
      }
    }
    for (int64_t p = s.row_begin; p < s.row_end; ++p) {
      if (std::string why = OutsideVocabulary(s.tokens[p], c.n_vocab); !why.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "token id ", s.tokens[p], " at position ", p, " ", why));
      }
    }
  }
  if (batch.rows() > limits.max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward batch of ", batch.rows(), " rows exceeds the budget of ", limits.max_rows));
  }
  return absl::OkStatus();
}

}  // namespace

struct ForwardPass::Impl {
  std::shared_ptr<const Model> model;
  ForwardLimits limits;
  std::unique_ptr<Activations> act;
  std::vector<RopeTable> ropes;                 // ModelConfig::ropes, in order
  PerThread<std::vector<float>> thread_floats;  // attention blocks, float GEMM panels
  LayerContext ctx;
  std::vector<SequenceRows> sequences;  // this pass's, reserved for 16
  ForwardBatch single;                  // the one-sequence Run()'s, reserved for 1
  std::vector<float> head_stage;        // (head_stage_rows, n_vocab)
  // Self-conditioning's buffers; empty without it.
  SelfConditioningScratch sc;
};

namespace {

// Floats of each worker thread's scratch: attention's (a query block's
// buffers and a head's staged K and V over the longest canvas) or a float
// GEMM's 16-row panel of the widest input, whichever is larger.
int64_t ThreadScratchFloats(const ModelConfig& c, ForwardLimits limits) {
  AttentionShape shape;
  shape.head_dim = static_cast<int>(c.max_head_dim());
  shape.n_tokens = limits.max_positions;
  return std::max(AttentionScratchFloats(shape),
                  FloatGemmScratchFloats(std::max({c.n_embd, c.max_ffn_width(), c.max_q_dim()})));
}

// Floats of each worker's self-conditioning scratch (0 without it): a
// column block of kScEmbeddingRows embedding rows.
int64_t ScScratchFloats(const ModelConfig& c) {
  return c.self_conditioning ? kScEmbeddingRows * kScColumns : 0;
}

// Rows of self-conditioning probabilities a pass holds at once: a whole
// canvas (and at least 256 rows), so that a step's soft embedding reads the
// embedding once; a batch of more rows reads it once per chunk. Not every
// row a pass may compute: at the real vocabulary a row takes 1 MiB.
int64_t ScChunkRows(const ModelConfig& c, ForwardLimits limits) {
  return std::min<int64_t>(limits.max_rows, std::max<int64_t>(c.canvas_length, 256));
}

// Floats of the self-conditioning probabilities (0 without it).
int64_t ScProbabilityFloats(const ModelConfig& c, ForwardLimits limits) {
  return c.self_conditioning ? ScChunkRows(c, limits) * c.n_vocab : 0;
}

// Floats of the RoPE tables: cos and sin of every position for each table.
int64_t RopeFloats(const ModelConfig& c, ForwardLimits limits) {
  int64_t floats = 0;
  for (const RopeSpec& spec : c.ropes) floats += int64_t{limits.max_positions} * spec.dims;
  return floats;
}

}  // namespace

size_t ForwardPass::ActivationBytes(const ModelConfig& c, ForwardLimits limits) {
  // The per-thread scratch counts once for every thread that may run a task.
  const size_t threads = static_cast<size_t>(tbb::info::default_concurrency());
  return Activations::Bytes(c, limits.max_rows) +
         static_cast<size_t>(RopeFloats(c, limits)) * sizeof(float) +
         static_cast<size_t>(std::max(0, limits.head_stage_rows)) * static_cast<size_t>(c.n_vocab) *
             sizeof(float) +
         static_cast<size_t>(ScProbabilityFloats(c, limits)) * sizeof(float) +
         threads * static_cast<size_t>(ThreadScratchFloats(c, limits) + ScScratchFloats(c)) *
             sizeof(float);
}

size_t ForwardPass::ActivationBytes(const ModelConfig& c, int max_tokens) {
  return ActivationBytes(c, ForwardLimits{max_tokens, max_tokens});
}

absl::StatusOr<std::unique_ptr<ForwardPass>> ForwardPass::Create(std::shared_ptr<const Model> model,
                                                                 int max_tokens) {
  return Create(std::move(model), ForwardLimits{max_tokens, max_tokens});
}

absl::StatusOr<std::unique_ptr<ForwardPass>> ForwardPass::Create(std::shared_ptr<const Model> model,
                                                                 ForwardLimits limits) {
  const ModelConfig& c = model->config();
  if (limits.max_positions < 1 || limits.max_positions > c.n_ctx_train) {
    return absl::InvalidArgumentError(absl::StrCat("canvas of ", limits.max_positions,
                                                   " tokens is outside [1, context length ",
                                                   c.n_ctx_train, "]"));
  }
  if (limits.max_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("row budget of ", limits.max_rows, " rows"));
  }
  auto impl = std::make_unique<Impl>();
  impl->model = std::move(model);
  impl->limits = limits;
  DLLM_ASSIGN_OR_RETURN(impl->act, Activations::Create(c, limits.max_rows));
  for (const RopeSpec& spec : c.ropes) {
    RopeTable& table = impl->ropes.emplace_back();
    table.spec = spec;
    const int64_t half = spec.dims / 2;
    table.cos.resize(static_cast<size_t>(limits.max_positions * half));
    table.sin.resize(table.cos.size());
    for (int64_t pos = 0; pos < limits.max_positions; ++pos) {
      for (int64_t i = 0; i < half; ++i) {
        const double factor = spec.freq_factors.empty() ? 1.0 : spec.freq_factors[i];
        const double freq = std::pow(spec.theta, -2.0 * double(i) / double(spec.dims)) / factor;
        table.cos[static_cast<size_t>(pos * half + i)] =
            static_cast<float>(std::cos(double(pos) * freq));
        table.sin[static_cast<size_t>(pos * half + i)] =
            static_cast<float>(std::sin(double(pos) * freq));
      }
    }
  }
  LayerContext& ctx = impl->ctx;
  ctx.config = &impl->model->config();
  ctx.vk = &SelectVectorKernels(impl->model->isa());
  ctx.attend = SelectAttention(impl->model->isa());
  ctx.ropes = impl->ropes;
  ctx.eps = static_cast<float>(c.rms_eps);
  const int64_t floats = ThreadScratchFloats(c, limits);
  impl->thread_floats = PerThread<std::vector<float>>(static_cast<size_t>(floats), 0.0f);
  ctx.thread_floats = &impl->thread_floats;
  impl->sequences.reserve(16);
  impl->single.sequences.resize(1);
  impl->head_stage.resize(static_cast<size_t>(std::max(0, limits.head_stage_rows)) *
                          static_cast<size_t>(c.n_vocab));
  if (c.self_conditioning) {
    impl->sc.columns = PerThread<std::vector<float>>(static_cast<size_t>(ScScratchFloats(c)), 0.0f);
    impl->sc.probabilities.resize(static_cast<size_t>(ScProbabilityFloats(c, limits)));
    impl->sc.previous.reserve(static_cast<size_t>(limits.max_rows));
    impl->sc.temp_inv.reserve(static_cast<size_t>(limits.max_rows));
  }
  return std::unique_ptr<ForwardPass>(new ForwardPass(std::move(impl)));
}

ForwardPass::ForwardPass(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ForwardPass::~ForwardPass() = default;

const ForwardLimits& ForwardPass::limits() const { return impl_->limits; }
size_t ForwardPass::activation_bytes() const {
  return ActivationBytes(*impl_->ctx.config, impl_->limits);
}

absl::Status ForwardPass::Run(std::span<const int32_t> tokens, std::span<const int32_t> logit_rows,
                              float* logits, const LayerCheck* check, ForwardStats* stats) {
  SequenceInput& s = impl_->single.sequences[0];
  s.tokens = tokens;
  s.row_begin = 0;
  s.row_end = static_cast<int32_t>(tokens.size());
  s.logit_rows = logit_rows;
  s.logits = logits;
  return Run(impl_->single, check, stats);
}

namespace {

// The self-conditioning MLP's input for the computed rows `rows`, row i
// from previous[i] (its previous logits, n_vocab floats) at temp_inv[i]:
// h[r] = rmsnorm(sqrt(n_embd) * sum_v softmax(previous * temp_inv)_v *
// token_embd[v]) * pre_norm. The sum is a GEMM of the probabilities by the
// embedding: one task per block of kScColumns embedding columns, each
// dequantizing its part of kScEmbeddingRows rows at a time (every element
// once) and adding them, weighted, to every row's sum (add_weighted_rows).
// A row's sums do not depend on the other rows. At most ScChunkRows rows.
void SoftEmbeddings(const Model& model, std::span<const int32_t> rows,
                    std::span<const float* const> previous, std::span<const float> temp_inv,
                    SelfConditioningScratch& scratch, const LayerContext& ctx, Activations& act) {
  const ModelConfig& c = model.config();
  const int64_t V = c.n_vocab, d = c.n_embd;
  const GgufTensor& embd = model.token_embd();
  const size_t embd_row = RowBytes(embd.type, d);
  const int64_t n = static_cast<int64_t>(rows.size());
  float* probs = scratch.probabilities.data();  // (n, V)
  tbb::parallel_for(int64_t{0}, n, [&](int64_t i) {
    const float* l = previous[static_cast<size_t>(i)];
    const float t = temp_inv[static_cast<size_t>(i)];
    float* p = probs + i * V;
    float max = -INFINITY;
    for (int64_t v = 0; v < V; ++v) max = std::max(max, l[v] * t);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += p[v] = std::exp(l[v] * t - max);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t v = 0; v < V; ++v) p[v] *= inv;
  });
  float* soft = act.ffn_out;  // (n, d)
  const int64_t blocks = (d + kScColumns - 1) / kScColumns;
  tbb::parallel_for(int64_t{0}, blocks, [&](int64_t b) {
    // Column blocks start on a multiple of 256, so on a quantization block.
    const int64_t j0 = b * kScColumns, width = std::min(kScColumns, d - j0);
    const size_t skip = RowBytes(embd.type, j0);
    float* e = scratch.columns.Local().data();  // (kScEmbeddingRows, kScColumns)
    for (int64_t i = 0; i < n; ++i) std::fill(soft + i * d + j0, soft + i * d + j0 + width, 0.0f);
    for (int64_t v0 = 0; v0 < V; v0 += kScEmbeddingRows) {
      const int64_t k = std::min(kScEmbeddingRows, V - v0);
      for (int64_t i = 0; i < k; ++i) {
        DequantizeRow(embd.type, embd.data + (v0 + i) * embd_row + skip, e + i * kScColumns, width);
      }
      ctx.vk->add_weighted_rows(probs + v0, V, n, e, kScColumns, k, width, soft + j0, d);
    }
  });
  tbb::parallel_for(int64_t{0}, n, [&](int64_t i) {
    float* acc = soft + i * d;
    for (int64_t j = 0; j < d; ++j) acc[j] *= c.embed_scale;
    ctx.vk->rms_norm(acc, model.self_conditioning().pre_norm, ctx.eps, d,
                     act.h + rows[static_cast<size_t>(i)] * d);
  });
}

// DiffusionGemma's canvas rows (at or after the prompt): x = rmsnorm(x +
// the self-conditioning MLP of the previous step's logits, where the
// sequence brings them), without a weight. Prompt rows keep x. The
// batch's self-conditioned rows go through the soft embedding together,
// ScChunkRows at a time, and through the MLP at once.
void CanvasInputs(const Model& model, std::span<const SequenceRows> sequences,
                  SelfConditioningScratch& scratch, const LayerContext& ctx, Activations& act) {
  const ModelConfig& c = model.config();
  const int64_t d = c.n_embd, V = c.n_vocab;
  int64_t count = 0;
  scratch.previous.clear();
  scratch.temp_inv.clear();
  for (const SequenceRows& s : sequences) {
    const SequenceInput& in = *s.input;
    if (!s.live || in.self_conditioning.empty()) continue;
    const int32_t prompt = PromptRows(in);
    for (int32_t p = std::max(in.row_begin, prompt); p < in.row_end; ++p) {
      act.selected_rows[count++] = static_cast<int32_t>(s.row_offset + (p - in.row_begin));
      scratch.previous.push_back(in.self_conditioning.data() + int64_t{p - prompt} * V);
      scratch.temp_inv.push_back(in.self_conditioning_temp_inv);
    }
  }
  if (count > 0) {
    const int64_t chunk = static_cast<int64_t>(scratch.probabilities.size()) / V;
    for (int64_t first = 0; first < count; first += chunk) {
      const size_t at = static_cast<size_t>(first);
      const size_t n = static_cast<size_t>(std::min(chunk, count - first));
      SoftEmbeddings(model, std::span<const int32_t>(act.selected_rows + at, n),
                     std::span<const float* const>(scratch.previous).subspan(at, n),
                     std::span<const float>(scratch.temp_inv).subspan(at, n), scratch, ctx, act);
    }
    GatedFfn(ctx, model.self_conditioning().mlp, Gating::kGelu, c.n_ff, act.selected_rows, count,
             act.ffn_out, act);
    tbb::parallel_for(int64_t{0}, count, [&](int64_t i) {
      float* x = act.x + act.selected_rows[i] * d;
      ctx.vk->add(x, act.ffn_out + i * d, d, x);
    });
  }
  for (const SequenceRows& s : sequences) {
    if (!s.live) continue;
    const SequenceInput& in = *s.input;
    const int32_t prompt = PromptRows(in);
    tbb::parallel_for(std::max(in.row_begin, prompt), in.row_end, [&](int32_t p) {
      float* x = act.x + (s.row_offset + (p - in.row_begin)) * d;
      ctx.vk->rms_norm(x, nullptr, ctx.eps, d, x);
    });
  }
}

// logits = cap * tanh(logits / cap) over every live sequence's rows.
void SoftcapLogits(std::span<const SequenceRows> sequences, int64_t n_vocab, float cap) {
  for (const SequenceRows& s : sequences) {
    if (!s.live) continue;
    float* l = s.input->logits;
    const int64_t n = static_cast<int64_t>(s.input->logit_rows.size()) * n_vocab;
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 4096), [&](const auto& r) {
      for (int64_t i = r.begin(); i != r.end(); ++i) l[i] = cap * std::tanh(l[i] / cap);
    });
  }
}

// Whether every sequence's logits follow the one before's in memory, so
// that one head GEMM writes them all in place.
bool LogitsAdjacent(std::span<const SequenceRows> sequences, int64_t n_vocab) {
  const float* next = nullptr;
  for (const SequenceRows& s : sequences) {
    const SequenceInput& in = *s.input;
    if (in.logit_rows.empty()) continue;
    if (!s.live || (next != nullptr && in.logits != next)) return false;
    next = in.logits + static_cast<int64_t>(in.logit_rows.size()) * n_vocab;
  }
  return true;
}

// The output head over the normed logits rows in `h` (stacked as the
// batch lays them out): straight into place when the sequences' buffers
// are adjacent, else through `stage` (whole chunks of its rows, then each
// row copied to its sequence), else one GEMM per sequence. A row's bits
// are the same every way (the GEMM's rows do not depend on M).
void Head(const LayerContext& ctx, const Linear& output, const BatchRows& batch, const float* h,
          std::span<float> stage, const Activations& act) {
  const int64_t n_embd = ctx.config->n_embd, V = ctx.config->n_vocab;
  const LinearScratch scratch = Scratch(ctx, act, kXqRows);
  if (LogitsAdjacent(batch.sequences, V)) {
    // The first sequence with logit rows starts the run (its logit_offset is 0).
    const auto first =
        std::find_if(batch.sequences.begin(), batch.sequences.end(),
                     [](const SequenceRows& s) { return !s.input->logit_rows.empty(); });
    if (first != batch.sequences.end()) {
      output.Apply(h, n_embd, nullptr, batch.m_logits, first->input->logits, V, scratch);
    }
    return;
  }
  const int64_t stage_rows = static_cast<int64_t>(stage.size()) / V;
  if (stage_rows == 0) {
    for (const SequenceRows& s : batch.sequences) {
      const int64_t n = static_cast<int64_t>(s.input->logit_rows.size());
      if (!s.live || n == 0) continue;
      output.Apply(h + s.logit_offset * n_embd, n_embd, nullptr, n, s.input->logits, V, scratch);
    }
    return;
  }
  for (int64_t r0 = 0; r0 < batch.m_logits; r0 += stage_rows) {
    const int64_t n = std::min(stage_rows, batch.m_logits - r0);
    output.Apply(h + r0 * n_embd, n_embd, nullptr, n, stage.data(), V, scratch);
    for (const SequenceRows& s : batch.sequences) {
      const int64_t count = static_cast<int64_t>(s.input->logit_rows.size());
      const int64_t lo = std::max(r0, s.logit_offset);
      const int64_t hi = std::min(r0 + n, s.logit_offset + count);
      if (!s.live || lo >= hi) continue;
      std::memcpy(s.input->logits + (lo - s.logit_offset) * V, stage.data() + (lo - r0) * V,
                  sizeof(float) * static_cast<size_t>((hi - lo) * V));
    }
  }
}

// Drops the sequences whose `stop` is set; true when none is left.
bool DropStopped(std::vector<SequenceRows>& sequences) {
  bool any_live = false;
  for (SequenceRows& s : sequences) {
    if (s.live && s.input->stop != nullptr && s.input->stop->load(std::memory_order_relaxed)) {
      s.live = false;
    }
    any_live = any_live || s.live;
  }
  return !any_live;
}

}  // namespace

absl::Status ForwardPass::Run(const ForwardBatch& batch, const LayerCheck* check,
                              ForwardStats* stats) {
  Impl& s = *impl_;
  const Model& model = *s.model;
  const ModelConfig& c = model.config();
  DLLM_RETURN_IF_ERROR(CheckBatch(batch, c, s.limits));
  const Clock::time_point start = Clock::now();
  Activations& act = *s.act;

  // Stack the sequences' rows.
  s.sequences.clear();
  int64_t m = 0, m_logits = 0;
  for (const SequenceInput& in : batch.sequences) {
    s.sequences.push_back({&in, m, m_logits, true});
    for (int32_t p = in.row_begin; p < in.row_end; ++p, ++m) {
      act.row_tokens[m] = in.tokens[p];
      act.row_positions[m] = p;
    }
    const int64_t offset = s.sequences.back().row_offset;
    for (int32_t p : in.logit_rows) {
      act.logit_rows[m_logits] = static_cast<int32_t>(offset + (p - in.row_begin));
      act.logit_positions[m_logits++] = p;
    }
  }
  BatchRows rows;
  rows.sequences = s.sequences;
  rows.m = m;
  rows.positions = act.row_positions;
  rows.m_logits = m_logits;
  rows.logit_rows = act.logit_rows;
  rows.logit_positions = act.logit_positions;

  const GgufTensor& embd = model.token_embd();
  const size_t embd_row = RowBytes(embd.type, c.n_embd);
  tbb::parallel_for(int64_t{0}, m, [&](int64_t i) {
    float* x = act.x + i * c.n_embd;
    DequantizeRow(embd.type, embd.data + act.row_tokens[i] * embd_row, x, c.n_embd);
    if (c.embed_scale != 1.0f) {
      for (int64_t j = 0; j < c.n_embd; ++j) x[j] *= c.embed_scale;
    }
  });
  if (c.canvas_input_norm) CanvasInputs(model, s.sequences, s.sc, s.ctx, act);
  const double embed_seconds = SecondsSince(start);

  ForwardStats timed;
  OpClocks clocks;
  if (stats != nullptr) {
    clocks = {&timed.norm, &timed.projections, &timed.attention, &timed.ffn};
  }
  // Between layers, and before the output head (the largest single GEMM).
  const auto cancelled = [check] {
    if (check == nullptr) return false;
    if (check->poll) check->poll();
    return check->cancel != nullptr && check->cancel->load(std::memory_order_relaxed);
  };
  for (int l = 0; l < c.n_layer; ++l) {
    if (cancelled())
      return absl::CancelledError(absl::StrCat("forward cancelled before layer ", l));
    if (DropStopped(s.sequences)) {
      return absl::CancelledError(absl::StrCat("every sequence was stopped before layer ", l));
    }
    RunLayer(s.ctx, c.layers[static_cast<size_t>(l)], model.layers()[static_cast<size_t>(l)], l,
             rows, /*logits_only=*/l == c.n_layer - 1, act, clocks);
  }

  if (cancelled()) return absl::CancelledError("forward cancelled before the output head");
  if (DropStopped(s.sequences)) {
    return absl::CancelledError("every sequence was stopped before the output head");
  }
  const Clock::time_point head_start = Clock::now();
  double norm_seconds = 0;
  if (m_logits > 0) {
    RmsNormRows(*s.ctx.vk, act.x, m_logits, c.n_embd, model.output_norm(), s.ctx.eps, act.h);
    norm_seconds = SecondsSince(head_start);
    Head(s.ctx, model.output(), rows, act.h, s.head_stage, act);
    if (c.logit_softcap > 0) SoftcapLogits(s.sequences, c.n_vocab, c.logit_softcap);
  }
  if (stats != nullptr) {
    *stats = timed;
    stats->embed = embed_seconds;
    stats->norm += norm_seconds;
    stats->head = SecondsSince(head_start) - norm_seconds;
    stats->total = SecondsSince(start);
    stats->rows = m;
  }
  return absl::OkStatus();
}

}  // namespace dllm
