// CanvasView: the canvas rebuilt from stream events, rewinds, rendering.
#include "client/canvas_view.h"

#include "gtest/gtest.h"

namespace dllm {
namespace {

constexpr uint32_t kMask = 9;

v1::Started Started(uint32_t gen_length) {
  v1::Started s;
  s.set_gen_length(gen_length);
  s.set_mask_token_id(kMask);
  return s;
}

v1::StepEvent Step(uint32_t step, uint32_t position, uint32_t id, const std::string& piece) {
  v1::StepEvent e;
  e.set_step(step);
  v1::CommittedToken* t = e.add_committed();
  t->set_position(position);
  t->set_token_id(id);
  t->set_piece(piece);
  return e;
}

TEST(CanvasViewTest, AppliesCommittedTokensAndRewinds) {
  CanvasView view;
  view.Reset(Started(3));
  EXPECT_EQ(view.Render(false), "\xe2\x96\x91\xe2\x96\x91\xe2\x96\x91");
  EXPECT_EQ(view.masked(), 3u);
  view.Apply(Step(1, 1, 5, "a\nb"));
  view.Apply(Step(2, 0, 6, "x"));
  EXPECT_EQ(view.Render(false), "xa\\nb\xe2\x96\x91");
  EXPECT_EQ(view.ids(), (std::vector<uint32_t>{6, 5, kMask}));
  view.RewindTo(1);
  EXPECT_EQ(view.ids(), (std::vector<uint32_t>{kMask, 5, kMask}));
  view.RewindTo(0);
  EXPECT_EQ(view.masked(), 3u);
}

TEST(CanvasViewTest, WholeCanvasWinsAndUnknownTokensShowTheirId) {
  CanvasView view;
  view.Reset(Started(2));
  v1::StepEvent e;
  e.set_step(1);
  e.add_canvas(42);
  e.add_canvas(kMask);
  view.Apply(e);
  EXPECT_EQ(view.Render(false), "[42]\xe2\x96\x91");
  view.Learn(42, "hi");
  EXPECT_EQ(view.Render(false), "hi\xe2\x96\x91");
}

TEST(CanvasViewTest, ColorHighlightsTheLastCommit) {
  CanvasView view;
  view.Reset(Started(2));
  view.Apply(Step(1, 0, 1, "a"));
  view.Apply(Step(2, 1, 2, "b"));
  EXPECT_EQ(view.Render(true), "a\x1b[1;30;42mb\x1b[0m");
}

}  // namespace
}  // namespace dllm
