// KvCache: one sequence's keys and values, per layer, for every canvas
// position: K after its bias, norm and RoPE, V after its bias, exactly the
// rows attention reads. A forward pass writes the rows it computes and
// attends over the whole canvas from here, so the rows it does not compute
// keep the keys and values of the pass that last wrote them (the
// approximate caches of Fast-dLLM, engine/session/kv_cache_policy.h).
//
// Layout: per layer, K then V, each (n_pos, kv_dim) row-major, the same
// stride as the forward pass's own K/V rows, so attention reads either
// through one AttentionShape.
#ifndef DLLM_ENGINE_MODEL_KV_CACHE_H_
#define DLLM_ENGINE_MODEL_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace dllm {

class KvCache {
 public:
  KvCache(int n_layer, int n_pos, int64_t kv_dim);

  // Floats a cache holds: 2 x n_layer x n_pos x kv_dim.
  static size_t Floats(int n_layer, int n_pos, int64_t kv_dim);
  // Bytes a cache of `n_pos` positions holds for `config` (what admission
  // counts per sequence).
  static size_t BytesFor(const ModelConfig& config, int n_pos);

  int n_layer() const { return n_layer_; }
  int n_pos() const { return n_pos_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return data_.size() * sizeof(float); }

  // Row 0 of layer `layer`'s keys / values; position p is `kv_dim` floats on.
  float* k(int layer) { return data_.data() + LayerOffset(layer); }
  float* v(int layer) { return k(layer) + static_cast<size_t>(n_pos_) * kv_dim_; }
  const float* k(int layer) const { return data_.data() + LayerOffset(layer); }
  const float* v(int layer) const { return k(layer) + static_cast<size_t>(n_pos_) * kv_dim_; }

 private:
  size_t LayerOffset(int layer) const {
    return static_cast<size_t>(layer) * 2 * static_cast<size_t>(n_pos_) * kv_dim_;
  }
  int n_layer_ = 0;
  int n_pos_ = 0;
  int64_t kv_dim_ = 0;
  std::vector<float> data_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_KV_CACHE_H_
