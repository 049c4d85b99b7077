#include "service/http/stop_text.h"

#include <algorithm>

namespace dllm {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::string StopText::Add(absl::string_view delta) {
  if (stopped_) return "";
  held_.append(delta.data(), delta.size());
  // The earliest stop string in what is held ends the text there.
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_) {
    cut = std::min(cut, held_.find(stop));
  }
  size_t out = held_.size();
  if (cut != std::string::npos) {
    stopped_ = true;
    out = cut;
  } else {
    // Hold back the longest tail that is a proper prefix of a stop string:
    // the next delta may complete it.
    size_t keep = 0;
    for (const std::string& stop : stops_) {
      for (size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n) {
        if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
    out = held_.size() - keep;
    // Never split a character: its other bytes come with the held tail.
    while (out > 0 && out < held_.size() && IsContinuationByte(held_[out])) --out;
  }
  std::string ready = held_.substr(0, out);
  held_.erase(0, stopped_ ? held_.size() : out);
  sent_ += ready;
  return ready;
}

std::string StopText::Finish() {
  if (stopped_) return "";
  std::string rest = std::move(held_);
  held_.clear();
  sent_ += rest;
  return rest;
}

}  // namespace dllm
