// TextRelay: the text of one generation as an HTTP endpoint lets it out,
// shared by /v1/completions, /v1/chat/completions and /infill. Each step's
// stable-text delta goes through StopText (stop strings, n_indent); at the
// Final, whatever text no step carried follows (a generation's last step
// may end without a StepEvent, or one merged by the stride), then what the
// stop handling held back. So a stream's deltas, concatenated, are the
// whole response's text.
#ifndef DLLM_SERVICE_HTTP_TEXT_RELAY_H_
#define DLLM_SERVICE_HTTP_TEXT_RELAY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/http/stop_text.h"

namespace dllm {

class TextRelay {
 public:
  explicit TextRelay(std::vector<std::string> stops, int min_indent = 0)
      : stop_(std::move(stops), min_indent) {}

  // A step's text delta; returns what may be sent now.
  std::string OnDelta(absl::string_view delta);
  // The Final's whole text: the part no delta carried, then whatever was
  // held back. The text is complete afterwards.
  std::string OnFinal(absl::string_view final_text);
  // Ends the text early (a stop string, n_indent, a time limit): whatever
  // was held back.
  std::string Finish() { return stop_.Finish(); }

  bool stopped() const { return stop_.stopped(); }
  const std::string& stop_word() const { return stop_.stop_word(); }
  // Everything let out so far (the whole text once finished).
  const std::string& text() const { return stop_.text(); }

 private:
  StopText stop_;
  std::string raw_;  // every delta, before the stop handling
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_TEXT_RELAY_H_
