// Attention masks per sequence (forward_batch.h): the key ranges they give
// each row against llama.cpp's mask rules, and a masked forward pass
// against bidirectional passes it must equal bit for bit.
#include <cstring>
#include <string>
#include <vector>

#include "engine/model/forward.h"
#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

// Whether key `k` is masked for query `q`, as llama.cpp states its masks:
// a causal row with the standard window (is_masked_swa: q - k >= window),
// and DiffusionGemma's canvas row on a sliding layer (the canvas, and the
// prompt keys k >= prompt - window + 1).
bool LlamaCppMasked(const AttentionMask& mask, int32_t window, int32_t q, int32_t k, int32_t n) {
  if (k < 0 || k >= n) return true;
  switch (mask.kind) {
    case MaskKind::kBidirectional:
      return false;
    case MaskKind::kBlockCausal:
      return k / mask.block_length > q / mask.block_length;
    case MaskKind::kPromptCausal:
      if (q < mask.prompt_length) return k > q || (window > 0 && q - k >= window);
      return window > 0 && k < mask.prompt_length && k < mask.prompt_length - window + 1;
  }
  return true;
}

TEST(MaskTest, KeyRangesAreTheKeysLlamaCppsMasksLeave) {
  const int32_t n = 40;
  const AttentionMask masks[] = {
      {MaskKind::kBidirectional, 0, 0}, {MaskKind::kBlockCausal, 8, 0},
      {MaskKind::kBlockCausal, 7, 0},   {MaskKind::kPromptCausal, 0, 13},
      {MaskKind::kPromptCausal, 0, 0},  {MaskKind::kPromptCausal, 0, 40}};
  for (const AttentionMask& mask : masks) {
    // Block-causal masks come without a window in the models that use them.
    for (int32_t window : mask.kind == MaskKind::kBlockCausal ? std::vector<int32_t>{0}
                                                              : std::vector<int32_t>{0, 1, 5, 64}) {
      for (int32_t q = 0; q < n; ++q) {
        const KeyRange keys = KeysOf(mask, window, q, n);
        for (int32_t k = -1; k <= n; ++k) {
          const bool in_range = k >= keys.begin && k < keys.end;
          ASSERT_EQ(in_range, !LlamaCppMasked(mask, window, q, k, n))
              << MaskKindName(mask.kind) << " window " << window << " q " << q << " k " << k;
        }
      }
    }
    EXPECT_EQ(ReadsWholeCanvas(mask, n),
              mask.kind == MaskKind::kBidirectional ||
                  (mask.kind == MaskKind::kPromptCausal && mask.prompt_length == 0))
        << MaskKindName(mask.kind);
  }
}

std::vector<int32_t> Canvas(int n, int64_t n_vocab) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) tokens[i] = static_cast<int32_t>((i * 977 + 11) % n_vocab);
  return tokens;
}

std::vector<int32_t> Range(int begin, int end) {
  std::vector<int32_t> rows;
  for (int i = begin; i < end; ++i) rows.push_back(i);
  return rows;
}

const std::vector<std::string>& Models() {
  static const std::vector<std::string> models = {
      testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf",
      testing::TestDataDir() + "/models/tiny-dream-k-q4_k_m.gguf"};
  return models;
}

// Under a block-causal mask no row reads past its block, so the keys and
// values of finished blocks never change: decoding block by block, each
// pass computing one block over the canvas cut at its end and reading the
// earlier blocks from a cache (the exact block cache of LLaDA2), gives
// every row the bits of the one masked pass, on every ISA path.
TEST(MaskForwardTest, BlockCausalRowsEqualBlockByBlockPassesOverACache) {
  constexpr int kLength = 70, kBlock = 32;
  for (const std::string& path : Models()) {
    for (IsaLevel isa : SupportedIsaLevels()) {
      SCOPED_TRACE(path + " " + IsaLevelName(isa));
      auto model = Model::Load(path, {isa});
      ASSERT_TRUE(model.ok()) << model.status();
      const ModelConfig& c = (*model)->config();
      const int64_t V = c.n_vocab;
      const std::vector<int32_t> tokens = Canvas(kLength, V);
      auto pass = ForwardPass::Create(*model, kLength);
      ASSERT_TRUE(pass.ok()) << pass.status();
      const std::vector<int32_t> all = Range(0, kLength);
      ForwardBatch batch;
      batch.sequences.push_back(SequenceInput{tokens, 0, kLength, all});
      batch.sequences[0].mask = {MaskKind::kBlockCausal, kBlock, 0};
      std::vector<float> masked(static_cast<size_t>(kLength * V));
      batch.PackLogits(masked.data(), V);
      ASSERT_TRUE((*pass)->Run(batch).ok());
      KvCache cache(KvCache::LayerWidths(c), kLength);
      for (int begin = 0; begin < kLength; begin += kBlock) {
        const int end = std::min(kLength, begin + kBlock);
        const std::vector<int32_t> rows = Range(begin, end);
        ForwardBatch block;
        block.sequences.push_back(
            SequenceInput{std::span<const int32_t>(tokens).first(static_cast<size_t>(end)), begin,
                          end, rows, &cache});
        std::vector<float> blockwise(rows.size() * V);
        block.PackLogits(blockwise.data(), V);
        ASSERT_TRUE((*pass)->Run(block).ok());
        EXPECT_EQ(0, std::memcmp(blockwise.data(), masked.data() + begin * V,
                                 blockwise.size() * sizeof(float)))
            << "block at " << begin;
      }
      // The mask changes the rows it hides something from.
      std::vector<float> bidirectional(static_cast<size_t>(kLength * V));
      ASSERT_TRUE((*pass)->Run(tokens, all, bidirectional.data()).ok());
      EXPECT_NE(0, std::memcmp(bidirectional.data(), masked.data(), kBlock * V * sizeof(float)));
    }
  }
}

// Under a prompt-causal mask, prompt row p reads [0, p]: decoding the
// prompt one row at a time over a cache gives each prompt row the masked
// pass's bits. Its keys and values never change with the canvas, so a pass
// over the prompt alone into a cache, then a pass over the canvas rows
// reading the prompt from that cache, gives the canvas rows the bits of the
// one masked pass too (the exact prompt cache DiffusionGemma's encoder
// allows).
TEST(MaskForwardTest, PromptCausalRowsAndAPromptCachedOnceGiveTheMaskedPasssBits) {
  constexpr int kLength = 50, kPrompt = 19;
  for (const std::string& path : Models()) {
    for (IsaLevel isa : SupportedIsaLevels()) {
      SCOPED_TRACE(path + " " + IsaLevelName(isa));
      auto model = Model::Load(path, {isa});
      ASSERT_TRUE(model.ok()) << model.status();
      const ModelConfig& c = (*model)->config();
      const int64_t V = c.n_vocab;
      const std::vector<int32_t> tokens = Canvas(kLength, V);
      const AttentionMask mask{MaskKind::kPromptCausal, 0, kPrompt};
      auto pass = ForwardPass::Create(*model, kLength);
      ASSERT_TRUE(pass.ok()) << pass.status();
      const std::vector<int32_t> all = Range(0, kLength);
      ForwardBatch one;
      one.sequences.push_back(SequenceInput{tokens, 0, kLength, all});
      one.sequences[0].mask = mask;
      std::vector<float> masked(static_cast<size_t>(kLength * V));
      one.PackLogits(masked.data(), V);
      ASSERT_TRUE((*pass)->Run(one).ok());
      KvCache incremental(KvCache::LayerWidths(c), kLength);
      for (int p = 0; p < kPrompt; ++p) {
        const std::vector<int32_t> row = {p};
        ForwardBatch step;
        step.sequences.push_back(
            SequenceInput{std::span<const int32_t>(tokens).first(static_cast<size_t>(p + 1)), p,
                          p + 1, row, &incremental});
        std::vector<float> logits(static_cast<size_t>(V));
        step.PackLogits(logits.data(), V);
        ASSERT_TRUE((*pass)->Run(step).ok());
        EXPECT_EQ(0, std::memcmp(logits.data(), masked.data() + p * V, V * sizeof(float)))
            << "prompt row " << p;
      }
      KvCache cache(KvCache::LayerWidths(c), kLength);
      ForwardBatch prompt;
      prompt.sequences.push_back(SequenceInput{tokens, 0, kPrompt, {}, &cache});
      prompt.sequences[0].mask = mask;
      ASSERT_TRUE((*pass)->Run(prompt).ok());
      const std::vector<int32_t> canvas_rows = Range(kPrompt, kLength);
      for (KvCache* filled : {&cache, &incremental}) {
        ForwardBatch canvas;
        canvas.sequences.push_back(SequenceInput{tokens, kPrompt, kLength, canvas_rows, filled});
        canvas.sequences[0].mask = mask;
        std::vector<float> cached(canvas_rows.size() * V);
        canvas.PackLogits(cached.data(), V);
        ASSERT_TRUE((*pass)->Run(canvas).ok());
        EXPECT_EQ(0, std::memcmp(cached.data(), masked.data() + kPrompt * V,
                                 cached.size() * sizeof(float)))
            << (filled == &cache ? "prompt in one pass" : "prompt row by row");
      }
    }
  }
}

TEST(MaskForwardTest, MalformedMasksAreRefusedNamingTheSequence) {
  auto model = Model::Load(Models()[0], {BestIsaLevel()});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> tokens = Canvas(10, (*model)->config().n_vocab);
  auto pass = ForwardPass::Create(*model, 10);
  ASSERT_TRUE(pass.ok());
  std::vector<float> logits(static_cast<size_t>((*model)->config().n_vocab));
  const std::vector<int32_t> row = {3};
  for (const AttentionMask& mask :
       {AttentionMask{MaskKind::kBlockCausal, 0, 0}, AttentionMask{MaskKind::kPromptCausal, 0, 11},
        AttentionMask{MaskKind::kPromptCausal, 0, -1}}) {
    ForwardBatch batch;
    batch.sequences.push_back(SequenceInput{tokens, 0, 10, row, nullptr, logits.data()});
    batch.sequences[0].mask = mask;
    const absl::Status status = (*pass)->Run(batch);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << MaskKindName(mask.kind);
    EXPECT_NE(status.message().find("sequence 0"), std::string::npos) << status;
  }
  // Self-conditioning rides in the batch; a model without its weights says so.
  ForwardBatch batch;
  batch.sequences.push_back(SequenceInput{tokens, 0, 10, row, nullptr, logits.data()});
  batch.sequences[0].self_conditioning = logits;
  const absl::Status status = (*pass)->Run(batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("sequence 0: self-conditioning input, but llada has no "
                                  "self-conditioning"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace dllm
