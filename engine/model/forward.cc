#include "engine/model/forward.h"

#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_invoke.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/model/moe_routing.h"
#include "engine/parallel/task_graph.h"
#include "kernels/attention.h"
#include "kernels/dequant.h"
#include "kernels/vector_ops.h"

namespace dllm {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Widths {
  int64_t n_embd, q_dim, kv_dim, n_ff, half_dim;
  int64_t n_expert, n_expert_used;  // 0 for dense models
};

Widths WidthsOf(const ModelConfig& c) {
  return {c.n_embd, c.q_dim(), c.kv_dim(), c.ffn_width(), c.head_dim / 2,
          c.n_expert, c.n_expert_used};
}

// Floats per canvas row across all activation views. MoE adds the router
// logits, the routing weights and two n_embd rows (one expert's output, and
// the weighted sum over experts).
int64_t FloatsPerRow(const Widths& w) {
  const int64_t moe = w.n_expert > 0 ? w.n_expert + w.n_expert_used + 2 * w.n_embd : 0;
  return 2 * w.n_embd + 2 * w.q_dim + 2 * w.kv_dim + 2 * w.n_ff + 2 * w.half_dim + moe;
}

// Int32 routing state per canvas row (chosen experts, and the grouped rows
// and slots), plus the per-expert offsets.
int64_t RoutingInts(const Widths& w, int max_tokens) {
  return w.n_expert > 0 ? 3 * w.n_expert_used * max_tokens + 3 * w.n_expert + 1 : 0;
}

void RmsNormRows(const VectorKernels& vk, const float* x, int64_t m, int64_t n,
                 const float* weight, float eps, float* out) {
  tbb::parallel_for(int64_t{0}, m, [&](int64_t r) { vk.rms_norm(x + r * n, weight, eps, n, out + r * n); });
}

// What follows a q/k/v projection, per row: the bias (may be null), the
// per-head RMSNorm (`head_norm`, may be null; MoE arches' q/k norm) and the
// rotation of each head. NORM pairs (2i, 2i+1), NEOX pairs (i, i + d/2);
// angle pos * theta^(-2i/d). Unlike the `rope` vector kernel, which computes
// its angles per call, this reads cos/sin tables built once per canvas-size
// class: no sin/cos per step.
struct HeadEpilogue {
  const float* bias = nullptr;
  const float* head_norm = nullptr;
  float eps = 0;
  bool rotate = false;
};

void BiasNormRope(const VectorKernels& vk, RopeType type, float* x, int64_t width,
                  const int32_t* positions, int64_t m, int64_t head_dim, const HeadEpilogue& e,
                  const float* cos_table, const float* sin_table) {
  const int64_t half = head_dim / 2;
  tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
    float* row = x + r * width;
    if (e.bias != nullptr) {
      for (int64_t c = 0; c < width; ++c) row[c] += e.bias[c];
    }
    if (e.head_norm != nullptr) {
      for (int64_t h = 0; h < width / head_dim; ++h) {
        vk.rms_norm(row + h * head_dim, e.head_norm, e.eps, head_dim, row + h * head_dim);
      }
    }
    if (!e.rotate) return;
    const int64_t pos = positions ? positions[r] : r;
    const float* cs = cos_table + pos * half;
    const float* sn = sin_table + pos * half;
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

enum class Op { kNorm, kProjection, kAttention, kFfn };

// Int8 activation scratch, one per projection node so that nodes running
// concurrently (q/k/v, gate/up) never share one. The head reuses q's.
enum XqSlot { kXqQ, kXqK, kXqV, kXqO, kXqGate, kXqUp, kXqDown, kNumXq };

int64_t XqCols(const Widths& w, int slot) {
  return slot == kXqO ? w.q_dim : slot == kXqDown ? w.n_ff : w.n_embd;
}

struct FreeAligned {
  void operator()(uint8_t* p) const { std::free(p); }
};

}  // namespace

struct ForwardPass::Impl {
  std::shared_ptr<const Model> model;
  Widths w{};
  int max_tokens = 0;
  std::vector<float> buffer;
  // Views into `buffer`, each (max_tokens, width).
  float* x = nullptr;     // residual stream (n_embd)
  float* h = nullptr;     // normed block input / projection output (n_embd)
  float* q = nullptr;     // (q_dim)
  float* k = nullptr;     // (kv_dim)
  float* v = nullptr;     // (kv_dim)
  float* attn = nullptr;  // attention output (q_dim)
  float* gate = nullptr;  // (n_ff; MoE: n_ff_exp, the rows one expert serves)
  float* up = nullptr;    // (n_ff)
  // MoE only.
  float* router_logits = nullptr;  // (n_expert)
  float* route_weights = nullptr;  // (n_expert_used)
  float* expert_out = nullptr;     // (n_embd): one expert's down projection, compacted
  float* moe_sum = nullptr;        // (n_embd): the weighted sum over the row's experts
  std::vector<int32_t> routing;    // RoutingInts()
  int32_t* route_experts = nullptr;  // (max_tokens, n_expert_used)
  ExpertGroups groups;
  std::vector<float> route_probs;    // (n_expert) scratch
  std::vector<int32_t> route_order;  // (n_expert) scratch
  float* rope_cos = nullptr;  // (max_tokens, head_dim / 2)
  float* rope_sin = nullptr;
  // Per-worker float scratch: attention blocks and float-weight GEMM panels.
  PerThread<std::vector<float>> thread_floats;
  std::unique_ptr<uint8_t, FreeAligned> xq_buffer;
  size_t xq_bytes = 0;
  QuantizedRows xq[kNumXq];

  // What the graph's nodes read for the layer being run.
  const LayerWeights* layer = nullptr;
  int64_t n_tokens = 0;            // L
  int64_t m = 0;                   // rows past attention: L, or R on the last layer
  const int32_t* rows = nullptr;   // those rows' positions (null: 0..L-1)
  AttentionShape shape;
  AttentionFn attend = nullptr;
  const VectorKernels* vk = nullptr;

  TaskGraph graph;
  std::vector<Op> node_op;  // per graph node
  // When each node of the layer being run started and ended.
  std::vector<std::pair<Clock::time_point, Clock::time_point>> node_span;
  double op_seconds[4] = {};  // per Op, this Run()

  int AddNode(const char* name, Op op, std::function<void()> body, std::vector<int> after) {
    node_op.push_back(op);
    node_span.emplace_back();
    const size_t index = node_span.size() - 1;
    return graph.AddNode(
        name,
        [this, index, body = std::move(body)] {
          node_span[index].first = Clock::now();
          body();
          node_span[index].second = Clock::now();
        },
        after);
  }

  // Adds the layer just run to `op_seconds`: per kind of work, the wall time
  // its nodes covered (concurrent nodes such as q/k/v count once).
  void AccountLayer() {
    for (int op = 0; op < 4; ++op) {
      std::pair<Clock::time_point, Clock::time_point> spans[16];
      int n = 0;
      for (size_t i = 0; i < node_span.size() && n < 16; ++i) {
        if (static_cast<int>(node_op[i]) == op) spans[n++] = node_span[i];
      }
      // A worker waiting inside one node may run a sibling's tasks, so
      // spans can nest or start in any order: merge them sorted by start.
      std::sort(spans, spans + n);
      Clock::time_point covered_until{};
      double seconds = 0;
      for (int i = 0; i < n; ++i) {
        const Clock::time_point from = std::max(spans[i].first, covered_until);
        if (spans[i].second > from) seconds += std::chrono::duration<double>(spans[i].second - from).count();
        covered_until = std::max(covered_until, spans[i].second);
      }
      op_seconds[op] += seconds;
    }
  }

  LinearScratch Scratch(int slot) { return {&xq[slot], &thread_floats}; }
  HeadEpilogue Epilogue(const float* bias, const float* head_norm, bool rotate) const {
    return {bias, head_norm, static_cast<float>(model->config().rms_eps), rotate};
  }
  void BuildGraph();
  void AddDenseFfn(int after);
  void AddMoeFfn(int after);
  void RunMoeFfn();
  void RunAttention();
};

void ForwardPass::Impl::BuildGraph() {
  const ModelConfig& c = model->config();
  const float eps = static_cast<float>(c.rms_eps);
  // On the last layer only the rows whose logits are wanted go past the
  // k/v projections: `m` and `rows` say which.
  const int norm = AddNode("attn_norm", Op::kNorm, [this, eps] {
    RmsNormRows(*vk, x, n_tokens, w.n_embd, layer->attn_norm, eps, h);
  }, {});
  const int wq = AddNode("attn_q", Op::kProjection, [this] {
    layer->wq->Apply(h, w.n_embd, rows, m, q, w.q_dim, Scratch(kXqQ));
    BiasNormRope(*vk, model->config().rope_type, q, w.q_dim, rows, m, model->config().head_dim,
                 Epilogue(layer->bq, layer->q_norm, true), rope_cos, rope_sin);
  }, {norm});
  const int wk = AddNode("attn_k", Op::kProjection, [this] {
    layer->wk->Apply(h, w.n_embd, nullptr, n_tokens, k, w.kv_dim, Scratch(kXqK));
    BiasNormRope(*vk, model->config().rope_type, k, w.kv_dim, nullptr, n_tokens,
                 model->config().head_dim, Epilogue(layer->bk, layer->k_norm, true), rope_cos,
                 rope_sin);
  }, {norm});
  const int wv = AddNode("attn_v", Op::kProjection, [this] {
    layer->wv->Apply(h, w.n_embd, nullptr, n_tokens, v, w.kv_dim, Scratch(kXqV));
    BiasNormRope(*vk, model->config().rope_type, v, w.kv_dim, nullptr, n_tokens,
                 model->config().head_dim, Epilogue(layer->bv, nullptr, false), rope_cos,
                 rope_sin);
  }, {norm});
  const int att = AddNode("attention", Op::kAttention, [this] { RunAttention(); }, {wq, wk, wv});
  const int wo = AddNode("attn_output", Op::kProjection, [this] {
    layer->wo->Apply(attn, w.q_dim, nullptr, m, h, w.n_embd, Scratch(kXqO));
    // x[r] = x[rows[r]] + h[r]. On the last layer this compacts the residual
    // to the first m rows; summing into h first keeps the parallel loop free
    // of reads of rows another task is writing.
    tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
      float* sum = h + r * w.n_embd;
      vk->add(sum, x + (rows ? rows[r] : r) * w.n_embd, w.n_embd, sum);
    });
    tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
      std::memcpy(x + r * w.n_embd, h + r * w.n_embd, sizeof(float) * w.n_embd);
    });
  }, {att});
  const int fnorm = AddNode("ffn_norm", Op::kNorm, [this, eps] {
    RmsNormRows(*vk, x, m, w.n_embd, layer->ffn_norm, eps, h);
  }, {wo});
  if (model->config().moe()) {
    AddMoeFfn(fnorm);
  } else {
    AddDenseFfn(fnorm);
  }
}

void ForwardPass::Impl::AddDenseFfn(int after) {
  const int g = AddNode("ffn_gate", Op::kFfn, [this] {
    layer->gate->Apply(h, w.n_embd, nullptr, m, gate, w.n_ff, Scratch(kXqGate));
  }, {after});
  const int u = AddNode("ffn_up", Op::kFfn, [this] {
    layer->up->Apply(h, w.n_embd, nullptr, m, up, w.n_ff, Scratch(kXqUp));
  }, {after});
  const int act = AddNode("swiglu", Op::kFfn, [this] {
    tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
      vk->swiglu(gate + r * w.n_ff, up + r * w.n_ff, w.n_ff, gate + r * w.n_ff);
    });
  }, {g, u});
  AddNode("ffn_down", Op::kFfn, [this] {
    layer->down->Apply(gate, w.n_ff, nullptr, m, h, w.n_embd, Scratch(kXqDown));
    tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
      vk->add(x + r * w.n_embd, h + r * w.n_embd, w.n_embd, x + r * w.n_embd);
    });
  }, {act});
}

void ForwardPass::Impl::AddMoeFfn(int after) {
  AddNode("moe_ffn", Op::kFfn, [this] { RunMoeFfn(); }, {after});
}

// x += sum over the row's k experts of weight * down(silu(gate(h)) * up(h)).
// Each expert runs its GEMMs once, over the rows routed to it (gathered by
// index from h); the weighted outputs are added to the rows' sums in expert
// order, so a row's result depends on its own routing only.
void ForwardPass::Impl::RunMoeFfn() {
  const ModelConfig& c = model->config();
  const int64_t ne = w.n_expert, k = w.n_expert_used;
  layer->router->Apply(h, w.n_embd, nullptr, m, router_logits, ne, Scratch(kXqGate));
  for (int64_t r = 0; r < m; ++r) {
    RouteRow(router_logits + r * ne, ne, k, c.traits().moe_norm_weights, route_probs.data(),
             route_order.data(), route_experts + r * k, route_weights + r * k);
  }
  GroupByExpert(route_experts, m, k, ne, &groups);
  std::fill(moe_sum, moe_sum + m * w.n_embd, 0.0f);
  for (int64_t e = 0; e < ne; ++e) {
    const int64_t count = groups.count(e);
    if (count == 0) continue;
    const int32_t* rows_e = groups.rows.data() + groups.offset[e];
    const int32_t* slots_e = groups.slot.data() + groups.offset[e];
    const ExpertWeights& ex = layer->experts[static_cast<size_t>(e)];
    tbb::parallel_invoke(
        [&] { ex.gate->Apply(h, w.n_embd, rows_e, count, gate, w.n_ff, Scratch(kXqGate)); },
        [&] { ex.up->Apply(h, w.n_embd, rows_e, count, up, w.n_ff, Scratch(kXqUp)); });
    tbb::parallel_for(int64_t{0}, count, [&](int64_t i) {
      vk->swiglu(gate + i * w.n_ff, up + i * w.n_ff, w.n_ff, gate + i * w.n_ff);
    });
    ex.down->Apply(gate, w.n_ff, nullptr, count, expert_out, w.n_embd, Scratch(kXqDown));
    tbb::parallel_for(int64_t{0}, count, [&](int64_t i) {
      const int64_t r = rows_e[i];
      const float weight = route_weights[r * k + slots_e[i]];
      const float* src = expert_out + i * w.n_embd;
      float* dst = moe_sum + r * w.n_embd;
      for (int64_t j = 0; j < w.n_embd; ++j) dst[j] += weight * src[j];
    });
  }
  tbb::parallel_for(int64_t{0}, m, [&](int64_t r) {
    vk->add(x + r * w.n_embd, moe_sum + r * w.n_embd, w.n_embd, x + r * w.n_embd);
  });
}

void ForwardPass::Impl::RunAttention() {
  shape.n_tokens = static_cast<int>(n_tokens);
  const int64_t q_blocks = (m + kAttnQueryBlock - 1) / kAttnQueryBlock;
  // One task per (head, block of query rows); q holds the m rows compacted.
  tbb::parallel_for(tbb::blocked_range2d<int64_t>(0, shape.n_head, 1, 0, q_blocks, 1),
                    [&](const tbb::blocked_range2d<int64_t>& range) {
                      std::vector<float>& scratch = thread_floats.Local();
                      for (int64_t hd = range.rows().begin(); hd != range.rows().end(); ++hd) {
                        for (int64_t b = range.cols().begin(); b != range.cols().end(); ++b) {
                          const int64_t i0 = b * kAttnQueryBlock;
                          const int64_t i1 = std::min(m, i0 + kAttnQueryBlock);
                          attend(shape, q, k, v, attn, static_cast<int>(hd), static_cast<int>(i0),
                                 static_cast<int>(i1), nullptr, scratch.data());
                        }
                      }
                    });
}

// Int8 scratch bytes for canvases of `max_tokens`, each slot 64-byte aligned.
size_t XqBytes(const Widths& w, int max_tokens) {
  size_t bytes = 0;
  for (int slot = 0; slot < kNumXq; ++slot) {
    bytes += (QuantizedRowsBytes(max_tokens, XqCols(w, slot)) + 63) / 64 * 64;
  }
  return bytes;
}

size_t ForwardPass::ActivationBytes(const ModelConfig& config, int max_tokens) {
  const Widths w = WidthsOf(config);
  return static_cast<size_t>(FloatsPerRow(w) * max_tokens) * sizeof(float) +
         XqBytes(w, max_tokens) +
         static_cast<size_t>(RoutingInts(w, max_tokens) + 2 * w.n_expert) * 4;
}

absl::StatusOr<std::unique_ptr<ForwardPass>> ForwardPass::Create(
    std::shared_ptr<const Model> model, int max_tokens) {
  const ModelConfig& c = model->config();
  if (max_tokens < 1 || max_tokens > c.n_ctx_train) {
    return absl::InvalidArgumentError(absl::StrCat("canvas of ", max_tokens,
                                                   " tokens is outside [1, context length ",
                                                   c.n_ctx_train, "]"));
  }
  auto impl = std::make_unique<Impl>();
  impl->model = std::move(model);
  impl->w = WidthsOf(c);
  impl->max_tokens = max_tokens;
  const Widths& w = impl->w;
  impl->buffer.assign(static_cast<size_t>(FloatsPerRow(w) * max_tokens), 0.0f);
  float* p = impl->buffer.data();
  auto carve = [&p, max_tokens](int64_t width) {
    float* view = p;
    p += width * max_tokens;
    return view;
  };
  impl->x = carve(w.n_embd);
  impl->h = carve(w.n_embd);
  impl->q = carve(w.q_dim);
  impl->k = carve(w.kv_dim);
  impl->v = carve(w.kv_dim);
  impl->attn = carve(w.q_dim);
  impl->gate = carve(w.n_ff);
  impl->up = carve(w.n_ff);
  if (w.n_expert > 0) {
    impl->router_logits = carve(w.n_expert);
    impl->route_weights = carve(w.n_expert_used);
    impl->expert_out = carve(w.n_embd);
    impl->moe_sum = carve(w.n_embd);
    impl->routing.assign(static_cast<size_t>(RoutingInts(w, max_tokens)), 0);
    int32_t* ints = impl->routing.data();
    auto take = [&ints](int64_t n) {
      std::span<int32_t> view(ints, static_cast<size_t>(n));
      ints += n;
      return view;
    };
    impl->route_experts = take(w.n_expert_used * max_tokens).data();
    impl->groups.rows = take(w.n_expert_used * max_tokens);
    impl->groups.slot = take(w.n_expert_used * max_tokens);
    impl->groups.offset = take(w.n_expert + 1);
    impl->groups.next = take(w.n_expert);
    impl->route_probs.assign(static_cast<size_t>(w.n_expert), 0.0f);
    impl->route_order.assign(static_cast<size_t>(w.n_expert), 0);
  }
  impl->rope_cos = carve(w.half_dim);
  impl->rope_sin = carve(w.half_dim);
  for (int64_t pos = 0; pos < max_tokens; ++pos) {
    for (int64_t i = 0; i < w.half_dim; ++i) {
      const double freq = std::pow(c.rope_theta, -2.0 * double(i) / double(c.head_dim));
      impl->rope_cos[pos * w.half_dim + i] = static_cast<float>(std::cos(double(pos) * freq));
      impl->rope_sin[pos * w.half_dim + i] = static_cast<float>(std::sin(double(pos) * freq));
    }
  }
  impl->xq_bytes = XqBytes(w, max_tokens);
  void* xq_storage = std::aligned_alloc(64, impl->xq_bytes);
  if (xq_storage == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", impl->xq_bytes, " bytes of activation scratch"));
  }
  impl->xq_buffer.reset(static_cast<uint8_t*>(xq_storage));
  uint8_t* next = impl->xq_buffer.get();
  for (int slot = 0; slot < kNumXq; ++slot) {
    impl->xq[slot] = CarveQuantizedRows(next, max_tokens, XqCols(w, slot));
    next += (QuantizedRowsBytes(max_tokens, XqCols(w, slot)) + 63) / 64 * 64;
  }
  impl->shape.n_head = static_cast<int>(c.n_head);
  impl->shape.n_head_kv = static_cast<int>(c.n_head_kv);
  impl->shape.head_dim = static_cast<int>(c.head_dim);
  impl->shape.q_stride = static_cast<int>(w.q_dim);
  impl->shape.kv_stride = static_cast<int>(w.kv_dim);
  impl->shape.out_stride = static_cast<int>(w.q_dim);
  impl->shape.scale = static_cast<float>(1.0 / std::sqrt(double(c.head_dim)));
  impl->attend = SelectAttention(impl->model->isa());
  // Attention needs a block's scores; float weights a 16-row panel of the
  // widest input. Sized for the largest canvas the buffers allow.
  AttentionShape widest = impl->shape;
  widest.n_tokens = max_tokens;
  const int64_t thread_floats = std::max(
      AttentionScratchFloats(widest), FloatGemmScratchFloats(std::max({w.n_embd, w.n_ff, w.q_dim})));
  impl->thread_floats = PerThread<std::vector<float>>(static_cast<size_t>(thread_floats), 0.0f);
  impl->vk = &SelectVectorKernels(impl->model->isa());
  impl->BuildGraph();
  return std::unique_ptr<ForwardPass>(new ForwardPass(std::move(impl)));
}

ForwardPass::ForwardPass(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ForwardPass::~ForwardPass() = default;

int ForwardPass::max_tokens() const { return impl_->max_tokens; }
size_t ForwardPass::activation_bytes() const {
  return impl_->buffer.size() * sizeof(float) + impl_->xq_bytes +
         (impl_->routing.size() + impl_->route_probs.size() + impl_->route_order.size()) * 4;
}

absl::Status ForwardPass::Run(std::span<const int32_t> tokens,
                              std::span<const int32_t> logit_rows, float* logits,
                              const LayerCheck* check, ForwardStats* stats) {
  Impl& s = *impl_;
  const Model& model = *s.model;
  const ModelConfig& c = model.config();
  const int64_t L = static_cast<int64_t>(tokens.size());
  const int64_t R = static_cast<int64_t>(logit_rows.size());
  if (L < 1 || L > s.max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("canvas of ", L, " tokens exceeds the buffers for ", s.max_tokens));
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
  const Clock::time_point start = Clock::now();
  for (double& t : s.op_seconds) t = 0;

  const GgufTensor& embd = model.token_embd();
  const size_t embd_row = RowBytes(embd.type, c.n_embd);
  tbb::parallel_for(int64_t{0}, L, [&](int64_t i) {
    DequantizeRow(embd.type, embd.data + tokens[i] * embd_row, s.x + i * s.w.n_embd, c.n_embd);
  });
  const double embed_seconds = Since(start);

  // Between layers, and before the output head (the largest single GEMM).
  const auto cancelled = [check] {
    if (check == nullptr) return false;
    if (check->poll) check->poll();
    return check->cancel != nullptr && check->cancel->load(std::memory_order_relaxed);
  };
  s.n_tokens = L;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (cancelled()) return absl::CancelledError(absl::StrCat("forward cancelled before layer ", l));
    const bool last = l == c.n_layer - 1;
    s.layer = &model.layers()[static_cast<size_t>(l)];
    s.rows = last ? logit_rows.data() : nullptr;
    s.m = last ? R : L;
    s.graph.Run();
    if (stats != nullptr) s.AccountLayer();
  }

  if (cancelled()) return absl::CancelledError("forward cancelled before the output head");
  const Clock::time_point head_start = Clock::now();
  double norm_seconds = 0;
  if (R > 0) {
    RmsNormRows(*s.vk, s.x, R, s.w.n_embd, model.output_norm(), static_cast<float>(c.rms_eps),
                s.h);
    norm_seconds = Since(head_start);
    model.output().Apply(s.h, s.w.n_embd, nullptr, R, logits, c.n_vocab, s.Scratch(kXqQ));
  }
  if (stats != nullptr) {
    *stats = ForwardStats();
    stats->embed = embed_seconds;
    stats->norm = norm_seconds;
    stats->head = Since(head_start) - norm_seconds;
    stats->norm += s.op_seconds[static_cast<int>(Op::kNorm)];
    stats->projections = s.op_seconds[static_cast<int>(Op::kProjection)];
    stats->attention = s.op_seconds[static_cast<int>(Op::kAttention)];
    stats->ffn = s.op_seconds[static_cast<int>(Op::kFfn)];
    stats->total = Since(start);
  }
  return absl::OkStatus();
}

}  // namespace dllm
