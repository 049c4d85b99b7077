#include "service/http/generation_relay.h"

#include <utility>

namespace dllm {

void GenerationRelay::Write(const v1::GenerateEvent* event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(Item{*event, std::nullopt});
  }
  cv_.notify_one();
}

void GenerationRelay::Close(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(Item{std::nullopt, status});
  }
  cv_.notify_one();
}

std::optional<GenerationRelay::Item> GenerationRelay::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !items_.empty(); })) return std::nullopt;
  Item item = std::move(items_.front());
  items_.pop_front();
  return item;
}

}  // namespace dllm
