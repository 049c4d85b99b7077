// dllm-client generate: streams the text as it stabilizes (or every event as JSON, or a live
// canvas).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "client/canvas_view.h"
#include "client/cli/common.h"

namespace dllm::client_cli {

int RunGenerate(const ParsedFlags& flags) {
  if (auto s = flags.CheckOnly(Union(kConnectionFlags, kGenerationFlags)); !s.ok()) {
    return UsageError(s);
  }
  auto request = BuildGenerateRequest(flags);
  if (!request.ok()) return UsageError(request.status());
  int exit_code = 0;
  const std::unique_ptr<DllmClient> client = Connect(flags, &exit_code);
  if (client == nullptr) return exit_code;

  const bool json = flags.Has("json");
  const bool show_canvas = flags.Has("show-canvas") && !json;
  const bool live = show_canvas && isatty(STDOUT_FILENO);
  const std::string prompt_text = request->prompt().has_text() ? request->prompt().text() : "";
  CanvasView view;
  std::string streamed;  // the text deltas printed so far
  bool got_final = false;
  v1::Final final;
  const absl::Status status = client->Generate(*request, [&](const v1::GenerateEvent& event) {
    if (json) {
      std::printf("%s\n", ToJson(event).c_str());
      std::fflush(stdout);
    }
    switch (event.event_case()) {
      case v1::GenerateEvent::kStarted:
        view.Reset(event.started());
        if (show_canvas && !live) {
          const v1::Started& s = event.started();
          std::printf(
              "started: %u prompt tokens, gen_length %u, block_length %u, %u steps, %s, seed "
              "%llu\n",
              s.prompt_tokens(), s.gen_length(), s.block_length(), s.planned_steps(),
              AlgorithmName(s.algorithm()).c_str(), static_cast<unsigned long long>(s.seed()));
        }
        break;
      case v1::GenerateEvent::kStep: {
        const v1::StepEvent& step = event.step();
        view.Apply(step);
        if (live) {
          std::string frame = "\x1b[H\x1b[2J";
          absl::StrAppendFormat(&frame, "step %u/%u  committed %d  masked %u  %.0f ms\n\n",
                                step.step(), step.planned_steps(), step.committed_size(),
                                step.masked_remaining(), step.timings().step_seconds() * 1e3);
          frame += "\x1b[2m" + VisiblePiece(prompt_text) + "\x1b[0m" + view.Render(true) + "\n";
          std::fwrite(frame.data(), 1, frame.size(), stdout);
        } else if (show_canvas) {
          std::printf("step %u/%u: committed %d, %u masked left, %.1f ms\n", step.step(),
                      step.planned_steps(), step.committed_size(), step.masked_remaining(),
                      step.timings().step_seconds() * 1e3);
        } else if (!json) {
          std::fwrite(step.text_delta().data(), 1, step.text_delta().size(), stdout);
          streamed += step.text_delta();
        }
        std::fflush(stdout);
        break;
      }
      case v1::GenerateEvent::kFinal:
        got_final = true;
        final = event.final();
        break;
      default:
        break;
    }
    return true;
  });
  if (!status.ok()) {
    if (!json && !show_canvas) std::printf("\n");
    return Fail(status);
  }
  if (!got_final) return Fail(absl::InternalError("the stream ended without a Final event"));
  if (!json) {
    if (show_canvas) {
      std::printf("%s\n", final.text().c_str());
    } else if (absl::StartsWith(final.text(), streamed)) {
      // Whatever the events did not stream (all of it with --detail final).
      std::printf("%s\n", final.text().substr(streamed.size()).c_str());
    } else {
      std::printf("\n%s\n", final.text().c_str());
    }
    std::fprintf(stderr, "finish: %s, %u tokens, %u steps, %.3f s, %.1f tokens/s, seed %llu\n",
                 FinishName(final.finish_reason()).c_str(), final.usage().generated_tokens(),
                 final.usage().steps(), final.timings().total_seconds(),
                 final.timings().tokens_per_second(),
                 static_cast<unsigned long long>(final.seed()));
  }
  return 0;
}

}  // namespace dllm::client_cli
