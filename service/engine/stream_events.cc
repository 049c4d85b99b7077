#include "service/engine/stream_events.h"

#include <algorithm>

#include "engine/base/utf8.h"

namespace dllm {

std::string PieceOf(const BpeTokenizer& tokenizer, int32_t id) {
  return SanitizeUtf8(tokenizer.TokenPiece(id));
}

std::string StableText::Update(const DenoiseSession& session, int max_tokens, bool done) {
  const std::span<const int32_t> stable = session.StableTokens();
  const std::span<const int32_t> stops = session.stop_ids();
  const int length = std::min(static_cast<int>(stable.size()), max_tokens);
  std::string delta;
  for (; stable_ < length; ++stable_) {
    const int32_t id = stable[static_cast<size_t>(stable_)];
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

int BlockIndexOf(const SamplerConfig& config, const StepReport& report, int prompt_len) {
  const std::span<const int32_t> positions = report.positions;
  // LLaDA2's blocks count from position 0: the first is the one holding
  // the first generated position.
  if (config.family == SamplerFamily::kLlada2) {
    return report.block - prompt_len / std::max(1, config.block_length);
  }
  if (!config.threshold) return report.step / std::max(1, config.StepsPerBlock());
  return positions.empty()
             ? 0
             : (positions.back() - prompt_len) / std::max(1, config.EffectiveBlockLength());
}

void AddStepReport(const BpeTokenizer& tokenizer, const GenerationSpec& spec,
                   const DenoiseSession& session, const StepReport& report, bool with_tokens,
                   bool with_canvas, v1::StepEvent* event) {
  const int offset = session.request_prompt_len();
  if (const EntropyBoundDenoiser* eb = session.entropy_bound(); eb != nullptr) {
    const CanvasStepSummary& last = eb->last_step();
    event->set_block_index(last.canvas);
    v1::CanvasStep* c = event->mutable_canvas_step();
    c->set_canvas(last.canvas);
    c->set_temperature(last.temperature);
    c->set_accepted(last.accepted);
    c->set_mean_entropy(last.mean_entropy);
    if (with_canvas) {
      for (int32_t id : last.argmax) c->add_argmax(id);
    }
  } else {
    event->set_block_index(BlockIndexOf(spec.sampler, report, offset));
  }
  if (with_tokens) {
    AddCommitted(tokenizer, report.positions, report.tokens, offset, event, report.replaced,
                 session.model().tokens.mask);
  }
}

void AddCommitted(const BpeTokenizer& tokenizer, std::span<const int32_t> positions,
                  std::span<const int32_t> tokens, int position_offset, v1::StepEvent* event,
                  std::span<const int32_t> replaced, int32_t mask_id) {
  for (size_t i = 0; i < positions.size() && i < tokens.size(); ++i) {
    v1::CommittedToken* t = event->add_committed();
    t->set_position(positions[i] - position_offset);
    t->set_token_id(tokens[i]);
    t->set_piece(PieceOf(tokenizer, tokens[i]));
    if (i < replaced.size() && replaced[i] != mask_id) t->set_replaced_token_id(replaced[i]);
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
  for (int p = session.request_prompt_len(); p < session.prompt_len() + session.gen_length(); ++p) {
    event->add_canvas(canvas[p]);
  }
}

v1::Started MakeStarted(const GenerationSpec& spec, const Model& model, double queue_seconds) {
  v1::Started started;
  started.set_prompt_tokens(static_cast<uint32_t>(spec.prompt.size()));
  started.set_gen_length(spec.sampler.gen_length);
  started.set_planned_steps(spec.planned_steps());
  started.set_mask_token_id(model.config().tokens.mask);
  started.set_queue_seconds(queue_seconds);
  started.set_seed(spec.sampler.seed);
  started.set_suffix_tokens(static_cast<uint32_t>(spec.suffix.size()));
  if (spec.entropy_bound) {
    const EntropyBoundConfig& c = spec.entropy_bound->config;
    started.set_sampler(v1::SAMPLER_ENTROPY_BOUND);
    started.set_block_length(c.canvas_length);
    started.set_canvas_length(c.canvas_length);
    *started.mutable_entropy_bound() = EntropyBoundParamsToProto(c);
  } else {
    started.set_sampler(v1::SAMPLER_MASKED);
    started.set_block_length(spec.sampler.EffectiveBlockLength());
    started.set_algorithm(AlgorithmToProto(spec.sampler.algorithm));
    if (spec.sampler.family == SamplerFamily::kLlada2) {
      v1::Llada2Params* l = started.mutable_llada2();
      l->set_steps_per_block(static_cast<uint32_t>(spec.sampler.steps_per_block));
      if (spec.sampler.editing_threshold) l->set_editing_threshold(*spec.sampler.editing_threshold);
      l->set_max_post_steps(static_cast<uint32_t>(spec.sampler.max_post_steps));
      if (spec.sampler.threshold) started.set_threshold(*spec.sampler.threshold);
    }
  }
  return started;
}

v1::Final MakeFinal(const DenoiseSession& session, const GenerationSpec& spec,
                    const std::string& text) {
  v1::Final f;
  std::span<const int32_t> output = session.OutputTokens();
  output = output.first(std::min(output.size(), static_cast<size_t>(spec.sampler.gen_length)));
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
