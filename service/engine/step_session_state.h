// What a Step session's reactor and engine jobs share (serving.md 2.3). It
// outlives the reactor; its DenoiseSession is created and destroyed on the
// engine thread.
#ifndef DLLM_SERVICE_ENGINE_STEP_SESSION_STATE_H_
#define DLLM_SERVICE_ENGINE_STEP_SESSION_STATE_H_

#include <atomic>
#include <memory>
#include <string>

#include "engine/session/denoise_session.h"
#include "service/engine/engine_worker.h"
#include "service/engine/request_validation.h"
#include "service/engine/step_outbox.h"
#include "service/engine/stream_events.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

// What a session's reactor and engine jobs share.
struct StepSessionState {
  StepSessionState(std::shared_ptr<const Model> model, std::shared_ptr<StepOutbox> outbox,
                   ServiceMetrics* metrics)
      : model(std::move(model)),
        outbox(std::move(outbox)),
        metrics(ServiceMetrics::OrNoOp(metrics)),
        text(&this->model->tokenizer()) {}

  const std::shared_ptr<const Model> model;
  const std::shared_ptr<StepOutbox> outbox;
  ServiceMetrics* const metrics;  // non-owning; NoOp() when none was given

  // Set by the reactor at Open, before the open job is submitted.
  GenerationSpec spec;
  std::string session_id;
  std::unique_ptr<EngineWorker::SessionLease> lease;

  // Engine thread only.
  std::unique_ptr<DenoiseSession> session;
  StableText text;

  // Read by the reactor.
  std::atomic<bool> open{false};
  std::atomic<int> steps{0};           // Advance steps run
  std::atomic<int> generated{0};       // tokens in the last Final
  std::atomic<bool> eos{false};        // the last Final ended with end-of-text
  std::atomic<bool> completed{false};  // a Final was sent (the canvas is complete)
};

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_STEP_SESSION_STATE_H_
