#include "engine/model/forward.h"

#include <tbb/blocked_range2d.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/attention.h"
#include "kernels/dequant.h"

namespace dllm {
namespace {

struct Widths {
  int64_t n_embd, q_dim, kv_dim, n_ff, half_dim;
};

Widths WidthsOf(const ModelConfig& c) {
  return {c.n_embd, c.q_dim(), c.kv_dim(), c.n_ff, c.head_dim / 2};
}

// Floats per canvas row across all views.
int64_t FloatsPerRow(const Widths& w) {
  return 2 * w.n_embd + 2 * w.q_dim + 2 * w.kv_dim + 2 * w.n_ff + 2 * w.half_dim;
}

void RmsNormRows(const float* x, int64_t ldx, const int32_t* rows, int64_t m, int64_t n,
                 const float* weight, float eps, float* out, int64_t ldo) {
  tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
    const float* xr = x + (rows ? rows[r] : r) * ldx;
    double ss = 0;
    for (int64_t c = 0; c < n; ++c) ss += double(xr[c]) * xr[c];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
    float* o = out + r * ldo;
    for (int64_t c = 0; c < n; ++c) o[c] = xr[c] * scale * weight[c];
  });
}

// Rotates each head of `rows` rows in place. NORM pairs (2i, 2i+1), NEOX
// pairs (i, i + d/2); angle pos * theta^(-2i/d).
void ApplyRope(RopeType type, float* x, int64_t ldx, const int32_t* positions, int64_t m,
               int64_t n_heads, int64_t head_dim, const float* cos_table, const float* sin_table) {
  const int64_t half = head_dim / 2;
  tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
    const int64_t pos = positions ? positions[r] : r;
    const float* cs = cos_table + pos * half;
    const float* sn = sin_table + pos * half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + r * ldx + h * head_dim;
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

void AddBias(float* x, int64_t ldx, int64_t m, int64_t n, const float* bias) {
  if (bias == nullptr) return;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) x[r * ldx + c] += bias[c];
  }
}

}  // namespace

size_t Activations::BytesFor(const ModelConfig& config, int max_tokens) {
  return static_cast<size_t>(FloatsPerRow(WidthsOf(config)) * max_tokens) * sizeof(float);
}

absl::StatusOr<Activations> Activations::Create(const ModelConfig& config, int max_tokens) {
  if (max_tokens < 1 || max_tokens > config.n_ctx_train) {
    return absl::InvalidArgumentError(absl::StrCat("canvas of ", max_tokens,
                                                   " tokens is outside [1, context length ",
                                                   config.n_ctx_train, "]"));
  }
  const Widths w = WidthsOf(config);
  Activations a;
  a.max_tokens_ = max_tokens;
  a.buffer_.assign(static_cast<size_t>(FloatsPerRow(w) * max_tokens), 0.0f);
  float* p = a.buffer_.data();
  auto carve = [&p, max_tokens](int64_t width) {
    float* view = p;
    p += width * max_tokens;
    return view;
  };
  a.x_ = carve(w.n_embd);
  a.h_ = carve(w.n_embd);
  a.q_ = carve(w.q_dim);
  a.k_ = carve(w.kv_dim);
  a.v_ = carve(w.kv_dim);
  a.attn_ = carve(w.q_dim);
  a.gate_ = carve(w.n_ff);
  a.up_ = carve(w.n_ff);
  a.rope_cos_ = carve(w.half_dim);
  a.rope_sin_ = carve(w.half_dim);
  for (int64_t pos = 0; pos < max_tokens; ++pos) {
    for (int64_t i = 0; i < w.half_dim; ++i) {
      const double freq = std::pow(config.rope_theta, -2.0 * double(i) / double(config.head_dim));
      const double angle = double(pos) * freq;
      a.rope_cos_[pos * w.half_dim + i] = static_cast<float>(std::cos(angle));
      a.rope_sin_[pos * w.half_dim + i] = static_cast<float>(std::sin(angle));
    }
  }
  return a;
}

absl::Status Forward(const Model& model, Activations& act, absl::Span<const int32_t> tokens,
                     absl::Span<const int32_t> logit_rows, float* logits,
                     const std::atomic<bool>* cancel) {
  const ModelConfig& c = model.config();
  const int64_t L = static_cast<int64_t>(tokens.size());
  const int64_t R = static_cast<int64_t>(logit_rows.size());
  if (L < 1 || L > act.max_tokens()) {
    return absl::InvalidArgumentError(
        absl::StrCat("canvas of ", L, " tokens exceeds the buffers for ", act.max_tokens()));
  }
  for (int64_t r = 0; r < R; ++r) {
    if (logit_rows[r] < 0 || logit_rows[r] >= L || (r > 0 && logit_rows[r] <= logit_rows[r - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit row ", logit_rows[r], " at index ", r,
                       " is out of range or not ascending (canvas ", L, ")"));
    }
  }
  for (int64_t i = 0; i < L; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", tokens[i], " at position ", i,
                                                     " is outside the vocabulary of ", c.n_vocab));
    }
  }
  const Widths w = WidthsOf(c);
  const float eps = static_cast<float>(c.rms_eps);

  // Embedding lookup: dequantize each token's row.
  const GgufTensor& embd = model.token_embd();
  const size_t embd_row = RowBytes(embd.type, c.n_embd);
  tbb::parallel_for(int64_t{0}, L, [&](int64_t i) {
    DequantizeRow(embd.type, embd.data + tokens[i] * embd_row, act.x_ + i * w.n_embd, c.n_embd);
  });

  const AttentionFn attend = SelectAttention(model.isa());
  static tbb::enumerable_thread_specific<std::vector<float>> attn_scratch;
  AttentionShape shape;
  shape.n_tokens = static_cast<int>(L);
  shape.n_head = static_cast<int>(c.n_head);
  shape.n_head_kv = static_cast<int>(c.n_head_kv);
  shape.head_dim = static_cast<int>(c.head_dim);
  shape.q_stride = static_cast<int>(w.q_dim);
  shape.kv_stride = static_cast<int>(w.kv_dim);
  shape.out_stride = static_cast<int>(w.q_dim);
  shape.scale = static_cast<float>(1.0 / std::sqrt(double(c.head_dim)));
  const int64_t scratch_need = AttentionScratchFloats(shape);

  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      return absl::CancelledError(absl::StrCat("forward cancelled before layer ", l));
    }
    const LayerWeights& lw = model.layers()[static_cast<size_t>(l)];
    // The last layer only needs its queries, attention output and FFN for
    // the rows whose logits are asked for; keys and values still span the
    // whole canvas.
    const bool last = l == c.n_layer - 1;
    const int32_t* rows = last ? logit_rows.data() : nullptr;
    const int64_t m = last ? R : L;

    RmsNormRows(act.x_, w.n_embd, nullptr, L, w.n_embd, lw.attn_norm, eps, act.h_, w.n_embd);
    lw.wk->Apply(act.h_, w.n_embd, nullptr, L, act.k_, w.kv_dim);
    lw.wv->Apply(act.h_, w.n_embd, nullptr, L, act.v_, w.kv_dim);
    lw.wq->Apply(act.h_, w.n_embd, rows, m, act.q_, w.q_dim);
    AddBias(act.k_, w.kv_dim, L, w.kv_dim, lw.bk);
    AddBias(act.v_, w.kv_dim, L, w.kv_dim, lw.bv);
    AddBias(act.q_, w.q_dim, m, w.q_dim, lw.bq);
    ApplyRope(c.rope_type, act.k_, w.kv_dim, nullptr, L, c.n_head_kv, c.head_dim, act.rope_cos_,
              act.rope_sin_);
    ApplyRope(c.rope_type, act.q_, w.q_dim, rows, m, c.n_head, c.head_dim, act.rope_cos_,
              act.rope_sin_);

    // Attention: one task per (head, block of query rows). q holds m rows.
    const int64_t q_blocks = (m + kAttnQueryBlock - 1) / kAttnQueryBlock;
    tbb::parallel_for(
        tbb::blocked_range2d<int64_t>(0, c.n_head, 1, 0, q_blocks, 1),
        [&](const tbb::blocked_range2d<int64_t>& range) {
          std::vector<float>& scratch = attn_scratch.local();
          if (static_cast<int64_t>(scratch.size()) < scratch_need) scratch.resize(scratch_need);
          for (int64_t h = range.rows().begin(); h != range.rows().end(); ++h) {
            for (int64_t b = range.cols().begin(); b != range.cols().end(); ++b) {
              const int64_t i0 = b * kAttnQueryBlock;
              const int64_t i1 = std::min(m, i0 + kAttnQueryBlock);
              attend(shape, act.q_, act.k_, act.v_, act.attn_, static_cast<int>(h),
                     static_cast<int>(i0), static_cast<int>(i1), nullptr, scratch.data());
            }
          }
        });

    // x[rows] += attn · Woᵀ. On the last layer the residual rows are
    // compacted to the first R rows of x.
    lw.wo->Apply(act.attn_, w.q_dim, nullptr, m, act.h_, w.n_embd);
    for (int64_t r = 0; r < m; ++r) {
      const float* src = act.x_ + (rows ? rows[r] : r) * w.n_embd;
      float* dst = act.x_ + r * w.n_embd;
      const float* add = act.h_ + r * w.n_embd;
      for (int64_t col = 0; col < w.n_embd; ++col) dst[col] = src[col] + add[col];
    }

    RmsNormRows(act.x_, w.n_embd, nullptr, m, w.n_embd, lw.ffn_norm, eps, act.h_, w.n_embd);
    lw.gate->Apply(act.h_, w.n_embd, nullptr, m, act.gate_, w.n_ff);
    lw.up->Apply(act.h_, w.n_embd, nullptr, m, act.up_, w.n_ff);
    tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
      float* g = act.gate_ + r * w.n_ff;
      const float* u = act.up_ + r * w.n_ff;
      for (int64_t col = 0; col < w.n_ff; ++col) g[col] = g[col] / (1.0f + std::exp(-g[col])) * u[col];
    });
    lw.down->Apply(act.gate_, w.n_ff, nullptr, m, act.h_, w.n_embd);
    for (int64_t r = 0; r < m; ++r) {
      float* x = act.x_ + r * w.n_embd;
      const float* add = act.h_ + r * w.n_embd;
      for (int64_t col = 0; col < w.n_embd; ++col) x[col] += add[col];
    }
  }
  if (R == 0) return absl::OkStatus();
  RmsNormRows(act.x_, w.n_embd, nullptr, R, w.n_embd, model.output_norm(), eps, act.h_, w.n_embd);
  model.output().Apply(act.h_, w.n_embd, nullptr, R, logits, c.n_vocab);
  return absl::OkStatus();
}

}  // namespace dllm
