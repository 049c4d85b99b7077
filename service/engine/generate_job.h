// GenerateJob: one Generate request on the engine thread. It creates the
// DenoiseSession over the engine's pass inside the arena on its first
// step, advances it one step per turn (planned, so that the worker runs it
// in a batch with other requests' steps), and turns each step into stream
// events for its mailbox: the
// stable prefix (the leading run of committed positions of the generated
// region) decoded UTF-8-safely up to the first end-of-text token, committed
// tokens and the canvas at the requested detail, then one Final. It logs
// one line per request to stderr when it ends.
#ifndef DLLM_SERVICE_ENGINE_GENERATE_JOB_H_
#define DLLM_SERVICE_ENGINE_GENERATE_JOB_H_

#include <memory>
#include <optional>
#include <string>

#include "engine/session/denoise_session.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "service/engine/engine_worker.h"
#include "service/engine/generate_stream.h"
#include "service/engine/request_validation.h"
#include "service/engine/stream_events.h"

namespace dllm {

// The session a validated generation runs (Generate's, or a Step
// session's), its forwards through the engine's `pass`.
absl::StatusOr<std::unique_ptr<DenoiseSession>> CreateSession(std::shared_ptr<const Model> model,
                                                              const GenerationSpec& spec,
                                                              ForwardPass* pass);
// What admission reserves for it (EngineWorker::ReservationFor for the
// masked samplers).
EngineWorker::Reservation ReservationFor(const ModelConfig& model, const GenerationSpec& spec);

// Engine-thread only, except what EngineJob allows from any thread.
class GenerateJob : public EngineJob {
 public:
  // `metrics` may be null (nothing is recorded); `mailbox` receives every event and the end.
  GenerateJob(std::shared_ptr<const Model> model, GenerationSpec spec,
              std::shared_ptr<GenerateMailbox> mailbox, ServiceMetrics* metrics = nullptr);
  ~GenerateJob() override;

  // A unit is one denoising step (the first also creates the session).
  absl::StatusOr<std::span<const SequenceInput>> Plan(ForwardPass* pass) override;
  absl::StatusOr<bool> Complete(const ForwardStats& forward, double forward_seconds) override;
  void Finish(const absl::Status& status) override;
  void Deliver() override;

  const GenerationSpec& spec() const { return spec_; }
  int planned_steps() const;

 private:
  absl::Status Begin(ForwardPass* pass);
  // What follows each step: metrics, stream events; true while steps remain.
  absl::StatusOr<bool> AfterStep(const StepReport& report);
  // What the stream options add to a step's event: the committed tokens'
  // log-probabilities, the top candidates, the timings.
  absl::Status AddScoresAndTimings(const StepReport& report, v1::StepEvent* step);
  v1::Final BuildFinal() const;

  std::shared_ptr<const Model> model_;
  GenerationSpec spec_;
  std::shared_ptr<GenerateMailbox> mailbox_;
  ServiceMetrics* metrics_;  // non-owning; ServiceMetrics::NoOp() when none was given

  std::unique_ptr<DenoiseSession> session_;
  StableText text_;  // the stable prefix and every text delta so far
  EngineClock::time_point first_run_{};
  double first_step_seconds_ = 0;   // since arrival
  double first_token_seconds_ = 0;  // since arrival; 0 = none yet
  double step_seconds_total_ = 0;
  int steps_ = 0;
  // Waiting for the next StepEvent (stride, or DETAIL_TEXT without growth).
  v1::StepEvent pending_;
  int pending_steps_ = 0;
  // What Deliver() tells the client: the Final, or the status it ended with.
  std::optional<v1::Final> final_;
  absl::Status end_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_GENERATE_JOB_H_
