// StopText: OpenAI's `stop` over streamed text. The final text ends before
// the first occurrence of any stop string; while streaming, the deltas let
// out only text that cannot be the start of a stop string (and never part of
// a UTF-8 character), so that the deltas, concatenated, equal the final text
// of the same request made without `stream`.
//
// llama-server's n_indent (its /infill): with min_indent > 0 the text also
// ends at the first non-blank character of a line (after the first) that
// is indented by fewer than min_indent spaces or tabs; the newline and the
// indentation before it stay. That needs no holding back: whatever follows,
// the text up to that character is kept.
#ifndef DLLM_SERVICE_HTTP_STOP_TEXT_H_
#define DLLM_SERVICE_HTTP_STOP_TEXT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace dllm {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops, int min_indent = 0)
      : stops_(std::move(stops)), min_indent_(min_indent) {}

  // Adds the next stable text; returns what may be sent now. Empty once a
  // stop string was seen.
  std::string Add(absl::string_view delta);
  // The end of the text: whatever was held back (no stop string can follow).
  std::string Finish();

  bool stopped() const { return stopped_; }
  // The stop string that ended the text; empty when none did (or n_indent did).
  const std::string& stop_word() const { return stop_word_; }
  // Everything let out so far (the final text once Finish() was called).
  const std::string& text() const { return sent_; }

 private:
  // Where n_indent ends `held_` (npos: not in it); scans the last `fresh` bytes.
  size_t IndentCut(size_t fresh);

  std::vector<std::string> stops_;
  const int min_indent_;
  // n_indent's scan: a newline was seen, and `indent_` blanks since it.
  bool line_open_ = false;
  int indent_ = 0;
  std::string stop_word_;
  std::string held_;  // received, not yet let out
  std::string sent_;
  bool stopped_ = false;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_STOP_TEXT_H_
