// KvCache: one sequence's keys and values, per layer, for every canvas
// position: K after its bias, norm and RoPE, V after its bias, exactly the
// rows attention reads. A forward pass writes the rows it computes and
// attends over the canvas from here, so the rows it does not compute keep
// the keys and values of the pass that last wrote them: exactly what they
// would be when the sequence's mask keeps those rows from seeing the rows
// that changed (a causal prompt, finished blocks), and an approximation
// otherwise (Fast-dLLM's caches; DenoiseSession says when they refresh).
//
// Layout: per layer, K then V, each (n_pos, that layer's kv_dim)
// row-major, the same stride as the forward pass's own K/V rows for that
// layer, so attention reads either through one AttentionShape.
#ifndef DLLM_ENGINE_MODEL_KV_CACHE_H_
#define DLLM_ENGINE_MODEL_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/model_config.h"

namespace dllm {

class KvCache {
 public:
  // `layer_widths`: each layer's kv_dim (ModelConfig's LayerConfig::kv_dim).
  KvCache(std::span<const int64_t> layer_widths, int n_pos);

  // Each layer's kv_dim in `config`.
  static std::vector<int64_t> LayerWidths(const ModelConfig& config);
  // Floats a cache holds: 2 x n_pos x the sum of the widths.
  static size_t Floats(std::span<const int64_t> layer_widths, int n_pos);
  // Bytes a cache of `n_pos` positions holds for `config` (what admission
  // counts per sequence).
  static size_t BytesFor(const ModelConfig& config, int n_pos);

  int n_layer() const { return static_cast<int>(widths_.size()); }
  int n_pos() const { return n_pos_; }
  int64_t kv_dim(int layer) const { return widths_[static_cast<size_t>(layer)]; }
  std::span<const int64_t> layer_widths() const { return widths_; }
  size_t bytes() const { return data_.size() * sizeof(float); }

  // Row 0 of layer `layer`'s keys / values; position p is kv_dim(layer) floats on.
  float* k(int layer) { return data_.data() + offsets_[static_cast<size_t>(layer)]; }
  float* v(int layer) { return k(layer) + static_cast<size_t>(n_pos_) * kv_dim(layer); }
  const float* k(int layer) const { return data_.data() + offsets_[static_cast<size_t>(layer)]; }
  const float* v(int layer) const { return k(layer) + static_cast<size_t>(n_pos_) * kv_dim(layer); }

 private:
  std::vector<int64_t> widths_;
  std::vector<size_t> offsets_;  // each layer's K, in floats
  int n_pos_ = 0;
  std::vector<float> data_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_KV_CACHE_H_
