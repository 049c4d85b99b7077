#include "service/http/text_relay.h"

#include "absl/strings/match.h"

namespace dllm {

std::string TextRelay::OnDelta(absl::string_view delta) {
  raw_.append(delta.data(), delta.size());
  return stop_.Add(delta);
}

std::string TextRelay::OnFinal(absl::string_view final_text) {
  std::string rest;
  if (absl::StartsWith(final_text, raw_)) rest = stop_.Add(final_text.substr(raw_.size()));
  return rest + stop_.Finish();
}

}  // namespace dllm
