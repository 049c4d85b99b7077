// StopText: OpenAI's `stop` over streamed text. The final text ends before
// the first occurrence of any stop string; while streaming, the deltas let
// out only text that cannot be the start of a stop string (and never part of
// a UTF-8 character), so that the deltas, concatenated, equal the final text
// of the same request made without `stream`.
#ifndef DLLM_SERVICE_HTTP_STOP_TEXT_H_
#define DLLM_SERVICE_HTTP_STOP_TEXT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace dllm {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds the next stable text; returns what may be sent now. Empty once a
  // stop string was seen.
  std::string Add(absl::string_view delta);
  // The end of the text: whatever was held back (no stop string can follow).
  std::string Finish();

  bool stopped() const { return stopped_; }
  // Everything let out so far (the final text once Finish() was called).
  const std::string& text() const { return sent_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // received, not yet let out
  std::string sent_;
  bool stopped_ = false;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_STOP_TEXT_H_
