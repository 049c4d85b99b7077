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

// The logits of `rows` from one pass over `tokens` computing [begin, end)
// under `mask`, through `cache` when set.
std::vector<float> Logits(ForwardPass& pass, std::span<const int32_t> tokens, int32_t begin,
                          int32_t end, const std::vector<int32_t>& rows, KvCache* cache,
                          const AttentionMask& mask, int64_t n_vocab) {
  ForwardBatch batch;
  batch.sequences.push_back(SequenceInput{tokens, begin, end, rows, cache});
  batch.sequences[0].mask = mask;
  std::vector<float> logits(rows.size() * static_cast<size_t>(n_vocab));
  batch.PackLogits(logits.data(), n_vocab);
  const absl::Status status = pass.Run(batch);
  EXPECT_TRUE(status.ok()) << status;
  return logits;
}

// Calls `check(model, pass, tokens)` for each test model on every ISA path
// the machine has, with a pass and a canvas of `length` tokens.
template <typename Check>
void ForEachModelAndIsa(int length, Check check) {
  for (const std::string& path : Models()) {
    for (IsaLevel isa : SupportedIsaLevels()) {
      SCOPED_TRACE(path + " " + IsaLevelName(isa));
      auto model = Model::Load(path, {isa});
      ASSERT_TRUE(model.ok()) << model.status();
      auto pass = ForwardPass::Create(*model, length);
      ASSERT_TRUE(pass.ok()) << pass.status();
      check((*model)->config(), **pass, Canvas(length, (*model)->config().n_vocab));
    }
  }
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Under a block-causal mask no row reads past its block, so the keys and
// values of finished blocks never change: decoding block by block, each
// pass computing one block over the canvas cut at its end and reading the
// earlier blocks from a cache (the exact block cache of LLaDA2), gives
// every row the bits of the one masked pass, on every ISA path.
TEST(MaskForwardTest, BlockCausalRowsEqualBlockByBlockPassesOverACache) {
  constexpr int kLength = 70, kBlock = 32;
  ForEachModelAndIsa(kLength, [&](const ModelConfig& c, ForwardPass& pass,
                                  const std::vector<int32_t>& tokens) {
    const int64_t V = c.n_vocab;
    const std::vector<int32_t> all = Range(0, kLength);
    const std::vector<float> masked =
        Logits(pass, tokens, 0, kLength, all, nullptr, {MaskKind::kBlockCausal, kBlock, 0}, V);
    KvCache cache(KvCache::LayerWidths(c), kLength);
    for (int begin = 0; begin < kLength; begin += kBlock) {
      const int end = std::min(kLength, begin + kBlock);
      const std::vector<int32_t> rows = Range(begin, end);
      const std::vector<float> blockwise =
          Logits(pass, std::span<const int32_t>(tokens).first(static_cast<size_t>(end)), begin, end,
                 rows, &cache, {}, V);
      EXPECT_TRUE(
          SameBits(blockwise, std::span<const float>(masked).subspan(begin * V, blockwise.size())))
          << "block at " << begin;
    }
    // The mask changes the rows it hides something from.
    const std::vector<float> bidirectional = Logits(pass, tokens, 0, kLength, all, nullptr, {}, V);
    EXPECT_FALSE(SameBits(std::span<const float>(bidirectional).first(kBlock * V),
                          std::span<const float>(masked).first(kBlock * V)));
  });
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
  ForEachModelAndIsa(
      kLength, [](const ModelConfig& c, ForwardPass& pass, const std::vector<int32_t>& tokens) {
        const int64_t V = c.n_vocab;
        const AttentionMask mask{MaskKind::kPromptCausal, 0, kPrompt};
        const std::vector<float> masked =
            Logits(pass, tokens, 0, kLength, Range(0, kLength), nullptr, mask, V);
        KvCache incremental(KvCache::LayerWidths(c), kLength);
        for (int p = 0; p < kPrompt; ++p) {
          const std::vector<float> row =
              Logits(pass, std::span<const int32_t>(tokens).first(static_cast<size_t>(p + 1)), p,
                     p + 1, {p}, &incremental, {}, V);
          EXPECT_TRUE(SameBits(row, std::span<const float>(masked).subspan(p * V, V)))
              << "prompt row " << p;
        }
        KvCache cache(KvCache::LayerWidths(c), kLength);
        Logits(pass, tokens, 0, kPrompt, {}, &cache, mask, V);
        for (KvCache* filled : {&cache, &incremental}) {
          const std::vector<float> canvas =
              Logits(pass, tokens, kPrompt, kLength, Range(kPrompt, kLength), filled, mask, V);
          EXPECT_TRUE(SameBits(canvas, std::span<const float>(masked).subspan(kPrompt * V)))
              << (filled == &cache ? "prompt in one pass" : "prompt row by row");
        }
      });
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
