// What `dllm generate` shows of a run: the live canvas (--show-canvas on a
// terminal), the --json document whose field names match the official
// samplers' runs in shared/reference/official, and the one-line summary.
#ifndef DLLM_SERVICE_CLI_GENERATE_REPORT_H_
#define DLLM_SERVICE_CLI_GENERATE_REPORT_H_

#include <span>
#include <string>

#include "engine/base/flags.h"
#include "engine/model/isa_option.h"
#include "engine/model/model.h"
#include "engine/session/denoise_session.h"
#include "service/engine/request_validation.h"
#include "service/json/json.h"

namespace dllm {

// What a run measured.
struct RunTotals {
  double load_seconds = 0;
  double total_seconds = 0;
  double forward_seconds = 0;
  double sample_seconds = 0;
  double first_canvas_seconds = 0;  // the entropy-bound sampler's first canvas
  ForwardStats ops;
  Json steps = Json::array();  // one record per step, for --json
};

// Where and how a run ran.
struct RunPlace {
  int threads = 0;
  IsaLevel isa = IsaLevel::kScalar;
};

// Redraws the generated region: masked positions as a dim placeholder,
// this step's commits highlighted.
void DrawCanvas(const Model& model, const DenoiseSession& session, const StepReport& step,
                int planned_steps);
Json IdsJson(std::span<const int32_t> ids);
Json StepJson(const StepReport& step);
// The generated tokens as the user reads them: special tokens not
// rendered, invalid UTF-8 replaced.
std::string OutputText(const Model& model, std::span<const int32_t> output);

// The --json document of a masked run: its ids, text, settings and timings.
Json ResultJson(const ParsedFlags& flags, const Model& model, const GenerationSpec& spec,
                const DenoiseSession& session, const std::string& text, const RunTotals& totals,
                RunPlace place);
// The one-line summary of a masked run on stderr after the text.
void PrintSummary(const DenoiseSession& session, const GenerationSpec& spec,
                  const RunTotals& totals, RunPlace place);

// The same two of an entropy-bound run.
Json EntropyBoundJson(const ParsedFlags& flags, const Model& model, const GenerationSpec& spec,
                      const DenoiseSession& session, const std::string& text,
                      const RunTotals& totals, RunPlace place);
void PrintEntropyBoundSummary(const DenoiseSession& session, const GenerationSpec& spec,
                              const RunTotals& totals, RunPlace place);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_GENERATE_REPORT_H_
