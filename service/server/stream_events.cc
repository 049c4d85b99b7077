#include "service/server/stream_events.h"

#include <algorithm>

#include "engine/base/utf8.h"

namespace dllm {

std::string PieceOf(const BpeTokenizer& tokenizer, int32_t id) {
  return SanitizeUtf8(tokenizer.TokenPiece(id));
}

std::string StableText::Update(const DenoiseSession& session, int32_t mask_id, bool done) {
  const std::span<const int32_t> canvas = session.canvas();
  const std::span<const int32_t> stops = session.sampler().stop_ids();
  const int prompt_len = session.prompt_len();
  const int gen_length = session.gen_length();
  std::string delta;
  while (stable_ < gen_length && canvas[prompt_len + stable_] != mask_id) {
    const int32_t id = canvas[prompt_len + stable_];
    ++stable_;
    if (ended_) continue;
    if (std::find(stops.begin(), stops.end(), id) != stops.end()) {
      ended_ = true;
      continue;
    }
    absl::StatusOr<std::string> piece = decoder_.Push(id);
    if (piece.ok()) delta += *piece;
  }
  if (done) delta += decoder_.Finish();
  text_ += delta;
  return delta;
}

void StableText::Reset() {
  decoder_.Finish();
  stable_ = 0;
  ended_ = false;
  text_.clear();
}

int BlockIndexOf(const SamplerConfig& config, int step, std::span<const int32_t> positions,
                 int prompt_len) {
  if (!config.threshold) return step / std::max(1, config.StepsPerBlock());
  return positions.empty()
             ? 0
             : (positions.back() - prompt_len) / std::max(1, config.EffectiveBlockLength());
}

void AddCommitted(const BpeTokenizer& tokenizer, std::span<const int32_t> positions,
                  std::span<const int32_t> tokens, int position_offset, v1::StepEvent* event) {
  for (size_t i = 0; i < positions.size() && i < tokens.size(); ++i) {
    v1::CommittedToken* t = event->add_committed();
    t->set_position(positions[i] - position_offset);
    t->set_token_id(tokens[i]);
    t->set_piece(PieceOf(tokenizer, tokens[i]));
  }
}

void AddCandidates(const BpeTokenizer& tokenizer, const std::vector<PositionCandidates>& candidates,
                   google::protobuf::RepeatedPtrField<v1::PositionCandidates>* out) {
  for (const PositionCandidates& pc : candidates) {
    v1::PositionCandidates* p = out->Add();
    p->set_position(pc.position);
    for (const TokenProb& tp : pc.top) {
      v1::Candidate* c = p->add_candidates();
      c->set_token_id(tp.token);
      c->set_prob(tp.prob);
      c->set_piece(PieceOf(tokenizer, tp.token));
    }
  }
}

void AddCanvas(const DenoiseSession& session, v1::StepEvent* event) {
  const std::span<const int32_t> canvas = session.canvas();
  for (int p = 0; p < session.gen_length(); ++p) {
    event->add_canvas(canvas[session.prompt_len() + p]);
  }
}

v1::Started MakeStarted(const GenerationSpec& spec, const Model& model, double queue_seconds) {
  v1::Started started;
  started.set_prompt_tokens(static_cast<uint32_t>(spec.prompt.size()));
  started.set_gen_length(spec.sampler.gen_length);
  started.set_block_length(spec.sampler.EffectiveBlockLength());
  started.set_planned_steps(spec.sampler.PlannedSteps());
  started.set_mask_token_id(model.config().tokens.mask);
  started.set_queue_seconds(queue_seconds);
  started.set_seed(spec.sampler.seed);
  started.set_algorithm(AlgorithmToProto(spec.sampler.algorithm));
  started.set_suffix_tokens(static_cast<uint32_t>(spec.suffix.size()));
  return started;
}

v1::Final MakeFinal(const DenoiseSession& session, const GenerationSpec& spec,
                    const std::string& text) {
  v1::Final f;
  const std::span<const int32_t> output = session.OutputTokens();
  const bool eos = static_cast<int>(output.size()) < spec.sampler.gen_length;
  f.set_finish_reason(eos ? v1::FINISH_REASON_EOS : v1::FINISH_REASON_LENGTH);
  for (int32_t id : output) f.add_token_ids(id);
  f.set_text(text);
  const int prompt_len = static_cast<int>(spec.prompt.size());
  v1::Usage* u = f.mutable_usage();
  u->set_prompt_tokens(prompt_len);
  u->set_generated_tokens(static_cast<uint32_t>(output.size()));
  u->set_canvas_tokens(spec.canvas_tokens());
  u->set_suffix_tokens(static_cast<uint32_t>(spec.suffix.size()));
  u->set_steps(session.steps());
  u->set_forward_passes(session.forward_passes());
  f.set_seed(spec.sampler.seed);
  f.set_exited_early(session.exited_early());
  return f;
}

}  // namespace dllm
