// The parts of stream events that Generate and the Step session build
// alike: the stable prefix and its text, committed tokens and candidates
// with their pieces, Started and Final. GenerateJob and StepOpJob (the
// engine side of both streaming RPCs) both use these, so the two RPCs
// describe a step the same way.
#ifndef DLLM_SERVICE_ENGINE_STREAM_EVENTS_H_
#define DLLM_SERVICE_ENGINE_STREAM_EVENTS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dllm/v1/dllm.pb.h"
#include "engine/model/model.h"
#include "engine/session/denoise_session.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "service/engine/request_validation.h"

namespace dllm {

// A token's own text (CommittedToken.piece, Candidate.piece); a partial
// UTF-8 sequence shows as U+FFFD.
std::string PieceOf(const BpeTokenizer& tokenizer, int32_t id);

// The stable prefix of the generated region (the leading run of committed
// positions, which can no longer change) and its text, decoded UTF-8-safely
// up to the first end-of-text token. Engine-thread only.
class StableText {
 public:
  explicit StableText(const BpeTokenizer* tokenizer)
      : decoder_(tokenizer, /*render_special=*/false) {}

  // Extends the prefix over the tokens of `session` that became stable
  // since the last call (DenoiseSession::StableTokens, at most `max_tokens`
  // of them) and returns the text that adds; `done` (the canvas is
  // complete) also flushes bytes held for an unfinished UTF-8 sequence.
  std::string Update(const DenoiseSession& session, int max_tokens, bool done);
  // Back to an empty prefix and no text (after a Step session's Rewind the
  // text starts over).
  void Reset();

  int stable_length() const { return stable_; }
  const std::string& text() const { return text_; }  // every delta so far

 private:
  StreamingDecoder decoder_;
  int stable_ = 0;
  bool ended_ = false;  // the prefix reached an end-of-text token
  std::string text_;
};

// The block a step worked on: by schedule, or under threshold decoding
// where its last commit landed; LLaDA2's, counted from the block holding
// the first generated position.
int BlockIndexOf(const SamplerConfig& config, const StepReport& report, int prompt_len);

// What both RPCs say of one step of `session`: block_index (the canvas's
// under the entropy-bound sampler, which also fills canvas_step, with the
// argmax tokens when `with_canvas`), and when `with_tokens` the committed
// tokens at API positions.
void AddStepReport(const BpeTokenizer& tokenizer, const GenerationSpec& spec,
                   const DenoiseSession& session, const StepReport& report, bool with_tokens,
                   bool with_canvas, v1::StepEvent* event);

// Appends one CommittedToken per (positions[i] - position_offset, tokens[i]),
// with replaced_token_id where `replaced[i]` (the position's token before,
// when given) is not the mask.
void AddCommitted(const BpeTokenizer& tokenizer, std::span<const int32_t> positions,
                  std::span<const int32_t> tokens, int position_offset, v1::StepEvent* event,
                  std::span<const int32_t> replaced = {}, int32_t mask_id = -1);
// Appends `candidates` as proto, pieces included.
void AddCandidates(const BpeTokenizer& tokenizer, const std::vector<PositionCandidates>& candidates,
                   google::protobuf::RepeatedPtrField<v1::PositionCandidates>* out);
// The generated region of the canvas, mask id where masked (the
// entropy-bound sampler's: the finished canvases, then the current one as
// the next step reads it).
void AddCanvas(const DenoiseSession& session, v1::StepEvent* event);

v1::Started MakeStarted(const GenerationSpec& spec, const Model& model, double queue_seconds);
// Final without timings: finish reason, tokens (at most the spec's
// gen_length: the entropy-bound sampler's canvases may hold more), `text`,
// usage, seed, early exit.
v1::Final MakeFinal(const DenoiseSession& session, const GenerationSpec& spec,
                    const std::string& text);

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_STREAM_EVENTS_H_
