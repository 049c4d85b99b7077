#include "service/http/infill_run.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/match.h"

namespace dllm {
namespace {

double MsBetween(InfillRun::Clock::time_point a, InfillRun::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The end of a text that ran out of time: up to and including its last
// newline when it holds one (whole lines), else all of it (whole tokens).
std::string_view CutAtLastNewline(std::string_view text) {
  const size_t newline = text.rfind('\n');
  return newline == std::string_view::npos ? text : text.substr(0, newline + 1);
}

}  // namespace

InfillRun::InfillRun(const InfillRequest& request, const BpeTokenizer& tokenizer)
    : text_(request.stop, request.n_indent),
      t_max_ms_(request.t_max_predict_ms),
      tokenizer_(tokenizer),
      span_ids_(static_cast<size_t>(std::max(request.n_predict, 0)), -1) {}

std::string InfillRun::OnStep(const v1::StepEvent& step) {
  const Clock::time_point now = Clock::now();
  // The first forward computes the whole canvas: llama-server's prompt
  // processing, its time the forward's own (not the queue's). A step that
  // commits nothing runs none (Dream's first): the first step that ran one
  // starts the generation's clock.
  if (!first_step_ && step.timings().forward_seconds() > 0) {
    first_step_ = now;
    prompt_ms_ = 1e3 * step.timings().forward_seconds();
  }
  for (const v1::CommittedToken& t : step.committed()) {
    if (t.position() < span_ids_.size()) {
      span_ids_[t.position()] = static_cast<int32_t>(t.token_id());
    }
  }
  stable_tokens_ = static_cast<int>(step.stable_length());
  steps_ = static_cast<int>(step.step());
  std::string ready = text_.OnDelta(step.text_delta());
  if (!text_.stopped() && t_max_ms_ > 0 && first_step_ &&
      MsBetween(*first_step_, now) > t_max_ms_) {
    timed_out_ = true;
  }
  if (text_.stopped() || timed_out_) ready += Finish();
  return Gate(std::move(ready));
}

std::string InfillRun::OnFinal(const v1::Final& final) {
  final_ = final;
  MarkFinished();
  return Gate(text_.OnFinal(final.text()));
}

std::string InfillRun::Finish() {
  MarkFinished();
  return text_.Finish();
}

void InfillRun::MarkFinished() {
  end_ = Clock::now();
  finished_ = true;
}

// What follows the last newline may yet be cut (at the limit) and cannot be
// taken back once sent. At the end it goes out unless the limit cut it.
std::string InfillRun::Gate(std::string ready) {
  if (t_max_ms_ <= 0) return ready;  // else `ready` is in text_.text()
  // What may go out: the answer once finished, else the whole lines.
  const std::string& text = text_.text();
  size_t upto = 0;
  if (finished_) {
    upto = Content().size();
  } else if (absl::StrContains(text, '\n')) {
    upto = CutAtLastNewline(text).size();
  }
  if (upto <= sent_) return "";
  std::string out = text.substr(sent_, upto - sent_);
  sent_ = upto;
  return out;
}

std::string InfillRun::Content() const {
  return timed_out_ ? std::string(CutAtLastNewline(text_.text())) : text_.text();
}

const char* InfillRun::StopType() const {
  if (!text_.stop_word().empty()) return "word";
  if (text_.stopped() || timed_out_) return "limit";
  if (final_ && final_->finish_reason() == v1::FINISH_REASON_EOS) return "eos";
  return "limit";
}

int InfillRun::TokensPredicted() const {
  if (final_ && !ended_early()) return static_cast<int>(final_->usage().generated_tokens());
  const size_t bytes = Content().size();
  size_t covered = 0;
  int n = 0;
  for (int i = 0; i < stable_tokens_ && i < static_cast<int>(span_ids_.size()); ++i) {
    if (span_ids_[i] < 0 || !tokenizer_.IsValid(span_ids_[i])) break;
    covered += tokenizer_.TokenPiece(span_ids_[i]).size();
    if (covered > bytes) break;
    ++n;
  }
  return n;
}

std::vector<int32_t> InfillRun::PredictedIds() const {
  return std::vector<int32_t>(span_ids_.begin(), span_ids_.begin() + TokensPredicted());
}

double InfillRun::predicted_ms() const { return first_step_ ? MsBetween(*first_step_, end_) : 0; }

}  // namespace dllm
