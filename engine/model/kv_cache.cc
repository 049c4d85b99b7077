#include "engine/model/kv_cache.h"

namespace dllm {

KvCache::KvCache(int n_layer, int n_pos, int64_t kv_dim)
    : n_layer_(n_layer), n_pos_(n_pos), kv_dim_(kv_dim), data_(Floats(n_layer, n_pos, kv_dim), 0.0f) {}

size_t KvCache::Floats(int n_layer, int n_pos, int64_t kv_dim) {
  return 2 * static_cast<size_t>(n_layer) * static_cast<size_t>(n_pos) * static_cast<size_t>(kv_dim);
}

size_t KvCache::BytesFor(const ModelConfig& config, int n_pos) {
  return Floats(static_cast<int>(config.n_layer), n_pos, config.kv_dim()) * sizeof(float);
}

}  // namespace dllm
