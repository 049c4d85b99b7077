// CanvasView: the canvas as the stream reports it, and its rendering.
#include "client/canvas_view.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dllm {

std::string VisiblePiece(const std::string& piece) {
  std::string out;
  for (char ch : piece) {
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\r') {
      out += "\\r";
    } else {
      out += ch;
    }
  }
  return out;
}

void CanvasView::Reset(const v1::Started& started) {
  mask_ = started.mask_token_id();
  canvas_.assign(started.gen_length(), mask_);
  history_.assign(1, canvas_);
  fresh_.clear();
}

void CanvasView::Learn(uint32_t id, const std::string& piece) { pieces_[id] = piece; }

void CanvasView::Apply(const v1::StepEvent& event) {
  fresh_.clear();
  for (const v1::CommittedToken& t : event.committed()) {
    Learn(t.token_id(), t.piece());
    if (t.position() < canvas_.size()) canvas_[t.position()] = t.token_id();
    fresh_.insert(t.position());
  }
  if (event.canvas_size() == static_cast<int>(canvas_.size())) {
    canvas_.assign(event.canvas().begin(), event.canvas().end());
  }
  if (history_.size() <= event.step()) history_.resize(event.step() + 1);
  history_[event.step()] = canvas_;
}

void CanvasView::RewindTo(uint32_t step) {
  fresh_.clear();
  if (step < history_.size() && !history_[step].empty()) canvas_ = history_[step];
  history_.resize(std::min<size_t>(history_.size(), step + 1));
}

std::string CanvasView::Render(bool color) const {
  std::string out;
  for (size_t p = 0; p < canvas_.size(); ++p) {
    if (canvas_[p] == mask_) {
      out += color ? "\x1b[2m\xe2\x96\x91\x1b[0m" : "\xe2\x96\x91";
      continue;
    }
    auto it = pieces_.find(canvas_[p]);
    const std::string piece =
        it == pieces_.end() ? absl::StrCat("[", canvas_[p], "]") : VisiblePiece(it->second);
    out += color && fresh_.count(p) ? absl::StrCat("\x1b[1;30;42m", piece, "\x1b[0m") : piece;
  }
  return out;
}

uint32_t CanvasView::masked() const {
  return static_cast<uint32_t>(std::count(canvas_.begin(), canvas_.end(), mask_));
}

}  // namespace dllm
