#include "service/http/stop_text.h"

#include <algorithm>

namespace dllm {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

size_t StopText::IndentCut(size_t fresh) {
  if (min_indent_ <= 0) return std::string::npos;
  for (size_t i = held_.size() - fresh; i < held_.size(); ++i) {
    const char c = held_[i];
    if (c == '\n') {
      line_open_ = true;
      indent_ = 0;
    } else if (line_open_ && (c == ' ' || c == '\t')) {
      ++indent_;
    } else if (line_open_) {
      line_open_ = false;
      if (indent_ < min_indent_) return i;
    }
  }
  return std::string::npos;
}

std::string StopText::Add(absl::string_view delta) {
  if (stopped_) return "";
  held_.append(delta.data(), delta.size());
  // The earliest stop string in what is held ends the text there, unless
  // a line indented too little ends it before.
  size_t cut = IndentCut(delta.size());
  const std::string* word = nullptr;
  for (const std::string& stop : stops_) {
    if (const size_t at = held_.find(stop); at < cut) {
      cut = at;
      word = &stop;
    }
  }
  if (word != nullptr) stop_word_ = *word;
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
