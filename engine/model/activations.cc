#include "engine/model/activations.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

constexpr size_t kAlign = 64;

size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

int64_t XqCols(const ModelConfig& c, int slot) {
  return slot == kXqO      ? c.max_q_dim()
         : slot == kXqDown ? c.max_ffn_width()
                           : c.n_embd;  // others read h
}

// Walks the views in one fixed order: Bytes() sums their sizes and Create()
// carves them, so the two cannot disagree.
template <typename Visit>
void ForEachView(const ModelConfig& c, int64_t rows, Activations* a, Visit visit) {
  auto floats = [&](float** view, int64_t width) {
    visit(reinterpret_cast<void**>(view), static_cast<size_t>(rows * width) * sizeof(float));
  };
  auto ints = [&](int32_t** view, int64_t count) {
    visit(reinterpret_cast<void**>(view), static_cast<size_t>(count) * sizeof(int32_t));
  };
  floats(&a->x, c.n_embd);
  floats(&a->h, c.n_embd);
  floats(&a->q, c.max_q_dim());
  floats(&a->k, c.max_kv_dim());
  floats(&a->v, c.max_kv_dim());
  floats(&a->attn, c.max_q_dim());
  floats(&a->gate, c.max_ffn_width());
  floats(&a->up, c.max_ffn_width());
  visit(reinterpret_cast<void**>(&a->row_keys), static_cast<size_t>(rows) * sizeof(KeyRange));
  ints(&a->row_tokens, rows);
  ints(&a->row_positions, rows);
  ints(&a->logit_rows, rows);
  ints(&a->logit_positions, rows);
  if (c.moe()) {
    const int64_t ne = c.n_expert, k = c.n_expert_used;
    floats(&a->router_logits, ne);
    floats(&a->route_weights, k);
    floats(&a->expert_out, c.n_embd);
    floats(&a->moe_sum, c.n_embd);
    ints(&a->route_experts, rows * k);
    visit(reinterpret_cast<void**>(&a->route_probs), static_cast<size_t>(3 * ne) * sizeof(float));
    ints(&a->route_order, ne);
    ints(&a->group_ints, 2 * rows * k + 2 * ne + 1);
  }
  const bool shared_expert = std::any_of(c.layers.begin(), c.layers.end(),
                                         [](const LayerConfig& l) { return l.n_ff_shared > 0; });
  if (c.traits().gemma || shared_expert) floats(&a->ffn_out, c.n_embd);
  if (c.traits().gemma) ints(&a->selected_rows, rows);
  for (int slot = 0; slot < kNumXq; ++slot) {
    void* base = nullptr;
    visit(&base, QuantizedRowsBytes(rows, XqCols(c, slot)));
    if (base != nullptr) a->xq[slot] = CarveQuantizedRows(base, rows, XqCols(c, slot));
  }
}

}  // namespace

size_t Activations::Bytes(const ModelConfig& config, int max_rows) {
  size_t total = 0;
  Activations sizing;
  ForEachView(config, max_rows, &sizing, [&](void**, size_t bytes) { total += Aligned(bytes); });
  return total;
}

absl::StatusOr<std::unique_ptr<Activations>> Activations::Create(const ModelConfig& config,
                                                                 int max_rows) {
  if (max_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("activations for ", max_rows, " rows"));
  }
  auto a = std::unique_ptr<Activations>(new Activations());
  a->max_rows_ = max_rows;
  a->bytes_ = Bytes(config, max_rows);
  // Zeroed by calloc, which maps a large block from the kernel's zero pages
  // instead of writing it: the server's pass is sized for its largest
  // batch, and rows that no batch reaches never become resident.
  void* block = std::calloc(a->bytes_ + kAlign, 1);
  if (block == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", a->bytes_, " bytes of activations"));
  }
  a->block_.reset(static_cast<uint8_t*>(block));
  uint8_t* next = a->block_.get() + (kAlign - reinterpret_cast<uintptr_t>(block) % kAlign) % kAlign;
  ForEachView(config, max_rows, a.get(), [&](void** view, size_t bytes) {
    *view = next;
    next += Aligned(bytes);
  });
  if (config.moe()) {
    const size_t rk = static_cast<size_t>(max_rows * config.n_expert_used);
    const size_t ne = static_cast<size_t>(config.n_expert);
    int32_t* g = a->group_ints;
    a->groups.rows = std::span<int32_t>(g, rk);
    a->groups.slot = std::span<int32_t>(g + rk, rk);
    a->groups.offset = std::span<int32_t>(g + 2 * rk, ne + 1);
    a->groups.next = std::span<int32_t>(g + 2 * rk + ne + 1, ne);
  }
  return a;
}

}  // namespace dllm
