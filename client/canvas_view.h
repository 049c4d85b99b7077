// `CanvasView`: what a client knows of a generation's canvas, rebuilt from
// the stream (Started, StepEvents, Rewound), and its text rendering for a
// terminal. The server sends token pieces with committed tokens and
// candidates, never a vocabulary, so the view learns them as they come.
#ifndef DLLM_CLIENT_CANVAS_VIEW_H_
#define DLLM_CLIENT_CANVAS_VIEW_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dllm/v1/dllm.pb.h"

namespace dllm {

// A token's text as shown in a canvas: newlines, tabs and carriage returns
// written as escapes, so one canvas stays on one line.
std::string VisiblePiece(const std::string& piece);

// One thread at a time.
class CanvasView {
 public:
  // Starts over: `gen_length` masked positions.
  void Reset(const v1::Started& started);
  // Remembers the text of token `id` (from a Candidate, say).
  void Learn(uint32_t id, const std::string& piece);
  // Applies a StepEvent: its committed tokens, or its whole canvas when it
  // carries one. The result is kept as the canvas after `event.step()` steps.
  void Apply(const v1::StepEvent& event);
  // Back to the canvas after `step` steps (as last seen).
  void RewindTo(uint32_t step);

  // The generated region as text: masks as `░` (dim when `color`), tokens
  // whose text is unknown as `[id]`, and with `color` the positions the last
  // event committed highlighted (ANSI escapes).
  std::string Render(bool color) const;
  uint32_t masked() const;
  const std::vector<uint32_t>& ids() const { return canvas_; }

 private:
  uint32_t mask_ = 0;
  std::vector<uint32_t> canvas_;                // (gen_length) token ids
  std::vector<std::vector<uint32_t>> history_;  // the canvas after each step
  std::map<uint32_t, std::string> pieces_;      // token id -> text
  std::set<uint32_t> fresh_;                    // positions the last event committed
};

}  // namespace dllm

#endif  // DLLM_CLIENT_CANVAS_VIEW_H_
