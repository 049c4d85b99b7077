#include "engine/model/kv_cache.h"

namespace dllm {

KvCache::KvCache(std::span<const int64_t> layer_widths, int n_pos)
    : widths_(layer_widths.begin(), layer_widths.end()),
      n_pos_(n_pos),
      data_(Floats(layer_widths, n_pos), 0.0f) {
  size_t offset = 0;
  for (int64_t width : widths_) {
    offsets_.push_back(offset);
    offset += 2 * static_cast<size_t>(n_pos) * static_cast<size_t>(width);
  }
}

std::vector<int64_t> KvCache::LayerWidths(const ModelConfig& config) {
  std::vector<int64_t> widths;
  for (const LayerConfig& layer : config.layers) widths.push_back(layer.kv_dim());
  return widths;
}

size_t KvCache::Floats(std::span<const int64_t> layer_widths, int n_pos) {
  size_t floats = 0;
  for (int64_t width : layer_widths) {
    floats += 2 * static_cast<size_t>(n_pos) * static_cast<size_t>(width);
  }
  return floats;
}

size_t KvCache::BytesFor(const ModelConfig& config, int n_pos) {
  return Floats(LayerWidths(config), n_pos) * sizeof(float);
}

}  // namespace dllm
