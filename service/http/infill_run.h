// InfillRun: one /infill completion's text and how it ended, from its
// events (one StepEvent a step, with timings).
//
// t_max_predict_ms, the diffusion way: llama-server stops once a newline
// has been generated after the limit, but a canvas commits out of order, so
// the text read left to right may hold its first newline only near the
// end. Here, once the time since the first step is over the limit, the
// run stops and the answer is the committed text from the span's front up
// to its first masked position, cut at its last newline when it holds one
// (whole lines), else whole as committed (whole tokens), else nothing.
#ifndef DLLM_SERVICE_HTTP_INFILL_RUN_H_
#define DLLM_SERVICE_HTTP_INFILL_RUN_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dllm/v1/dllm.pb.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "service/http/infill_request.h"
#include "service/http/text_relay.h"

namespace dllm {

class InfillRun {
 public:
  using Clock = std::chrono::steady_clock;

  InfillRun(const InfillRequest& request, const BpeTokenizer& tokenizer);

  // The text to send for a StepEvent; the text may be complete before the
  // canvas is (ended_early(): a stop string, n_indent, the time limit).
  std::string OnStep(const v1::StepEvent& step);
  // The rest of the text at the Final.
  std::string OnFinal(const v1::Final& final);

  bool ended_early() const { return text_.stopped() || timed_out_; }
  // The answer: the text as the stop handling and the time limit end it.
  std::string Content() const;
  // llama-server's stop_type: "word", "eos" or "limit".
  const char* StopType() const;
  const std::string& stop_word() const { return text_.stop_word(); }
  // The span tokens the answer returns: all the generated ones when the
  // canvas completed, else those of the committed front that the returned
  // text covers.
  int TokensPredicted() const;
  // Those tokens' ids.
  std::vector<int32_t> PredictedIds() const;

  // llama-server's timings: the first forward (over the whole canvas), and
  // the rest of the run.
  double prompt_ms() const { return prompt_ms_; }
  double predicted_ms() const;

  int stable_tokens() const { return stable_tokens_; }
  int steps() const { return steps_; }
  const std::optional<v1::Final>& final() const { return final_; }

  // Set by the caller from the call's events.
  std::string request_id;
  uint64_t seed = 0;

 private:
  // Ends the text early (a stop string, n_indent, the time limit).
  std::string Finish();
  // The run's end: the clock of predicted_ms stops, the gate lets all out.
  void MarkFinished();
  // With a time budget, a stream lets out whole lines only.
  std::string Gate(std::string ready);

  TextRelay text_;
  const int t_max_ms_;
  const BpeTokenizer& tokenizer_;
  std::vector<int32_t> span_ids_;  // committed span tokens (-1: masked)
  size_t sent_ = 0;                // bytes of a timed stream's text let out
  bool timed_out_ = false;
  bool finished_ = false;
  int stable_tokens_ = 0;
  int steps_ = 0;  // run so far
  double prompt_ms_ = 0;
  std::optional<v1::Final> final_;
  std::optional<Clock::time_point> first_step_;
  Clock::time_point end_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_INFILL_RUN_H_
