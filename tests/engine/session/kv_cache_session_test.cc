// The cache rules of DenoiseSession (denoise_session.h): which rows each
// step computes under `cache` none / prefix / dual, when the whole canvas
// is computed again (a block's first step, every `cache_refresh_steps`-th
// step, after a stale-making Commit or a Rewind), the Dream shift's extra
// row, CFG's two sequences with a cache each, and Forward() leaving the
// cache alone. A recording logits source sees every batch the session plans.
#include <string>
#include <tuple>
#include <vector>

#include "engine/session/denoise_session.h"
#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/toy_sampler.h"

namespace dllm {
namespace {

namespace toy = ::dllm::testing::toy;
using ::dllm::testing::IsOk;

// One sequence of one recorded batch.
struct PlannedSequence {
  int32_t row_begin = 0, row_end = 0;
  const KvCache* cache = nullptr;
  std::vector<int32_t> tokens;
};
using PlannedBatch = std::vector<PlannedSequence>;

// Records every batch; its logits favour token 1 + p % 5 at row p, more
// strongly the larger p % 7, so the sampler's choices are deterministic.
class RecordingSource final : public LogitsSource {
 public:
  // `fail_calls`: this many calls fail (before any is recorded) first.
  explicit RecordingSource(std::vector<PlannedBatch>* log, int fail_calls = 0)
      : log_(log), fail_calls_(fail_calls) {}
  absl::Status Run(const ForwardBatch& batch, const LayerCheck*, ForwardStats*) override {
    if (fail_calls_ > 0) {
      --fail_calls_;
      return absl::InternalError("the forward failed");
    }
    PlannedBatch planned;
    for (const SequenceInput& s : batch.sequences) {
      planned.push_back({s.row_begin, s.row_end, s.cache,
                         std::vector<int32_t>(s.tokens.begin(), s.tokens.end())});
      float* out = s.logits;
      for (int32_t p : s.logit_rows) {
        for (int t = 0; t < toy::kVocab; ++t)
          *out++ = t == 1 + p % 5 ? 2.0f + 0.1f * (p % 7) : 0.0f;
      }
    }
    log_->push_back(std::move(planned));
    return absl::OkStatus();
  }
  ForwardLimits limits() const override { return {1 << 20, 1 << 20}; }

 private:
  std::vector<PlannedBatch>* log_;
  int fail_calls_;
};

SessionModel ToyModel(const SamplerConfig& config) {
  SessionModel m;
  m.family = config.family;
  m.shift_logits = config.shift_logits;
  m.tokens = toy::Special();
  m.n_vocab = toy::kVocab;
  m.n_ctx = 1 << 16;
  m.kv_widths = {4, 4};
  return m;
}

std::unique_ptr<DenoiseSession> Open(const SamplerConfig& config, const CachingOptions& caching,
                                     std::vector<PlannedBatch>* log, int fail_calls = 0) {
  auto session =
      DenoiseSession::Create(ToyModel(config), config, toy::kPrompt,
                             std::make_unique<RecordingSource>(log, fail_calls), caching);
  EXPECT_THAT(session.status(), IsOk());
  return session.ok() ? std::move(*session) : nullptr;
}

// [row_begin, row_end) of the first sequence of each batch.
std::vector<std::pair<int, int>> Ranges(const std::vector<PlannedBatch>& log) {
  std::vector<std::pair<int, int>> out;
  for (const PlannedBatch& b : log) out.emplace_back(b[0].row_begin, b[0].row_end);
  return out;
}

void AdvanceAll(DenoiseSession& s) {
  while (!s.done()) ASSERT_THAT(s.Advance().status(), IsOk());
}

// gen 32 in blocks of 8, 2 steps a block; prompt 3, canvas 35.
SamplerConfig LladaBlocks() { return toy::Llada(32, 8, 8); }

TEST(KvCacheSessionTest, ExactDecodingComputesEveryRowWithoutACache) {
  std::vector<PlannedBatch> log;
  auto s = Open(LladaBlocks(), {CacheMode::kNone}, &log);
  AdvanceAll(*s);
  ASSERT_EQ(log.size(), 8u);
  for (const PlannedBatch& b : log) {
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].row_begin, 0);
    EXPECT_EQ(b[0].row_end, 35);
    EXPECT_EQ(b[0].cache, nullptr);
  }
  EXPECT_EQ(s->cache_refreshes(), 0);
}

TEST(KvCacheSessionTest, DualComputesTheBlockBetweenFullSteps) {
  std::vector<PlannedBatch> log;
  auto s = Open(LladaBlocks(), {CacheMode::kDual}, &log);
  std::vector<bool> refreshed;
  std::vector<int64_t> rows;
  while (!s->done()) {
    absl::StatusOr<StepReport> step = s->Advance();
    ASSERT_THAT(step.status(), IsOk());
    refreshed.push_back(step->cache_use == CacheUse::kRefill);
    rows.push_back(step->rows_computed);
  }
  const std::vector<std::pair<int, int>> want = {{0, 35}, {3, 11},  {0, 35}, {11, 19},
                                                 {0, 35}, {19, 27}, {0, 35}, {27, 35}};
  EXPECT_EQ(Ranges(log), want);
  EXPECT_EQ(refreshed, (std::vector<bool>{true, false, true, false, true, false, true, false}));
  EXPECT_EQ(rows, (std::vector<int64_t>{35, 8, 35, 8, 35, 8, 35, 8}));
  for (const PlannedBatch& b : log) EXPECT_NE(b[0].cache, nullptr);
  EXPECT_EQ(s->cache_refreshes(), 4);
}

// A forward that fails fills no cache: the step after it is still the
// block's full one, and nothing was counted.
TEST(KvCacheSessionTest, AFailedForwardLeavesTheCacheStateAsItWas) {
  std::vector<PlannedBatch> log;
  auto s = Open(LladaBlocks(), {CacheMode::kDual}, &log, /*fail_calls=*/1);
  EXPECT_FALSE(s->Advance().ok());
  EXPECT_EQ(s->cache_refreshes(), 0);
  absl::StatusOr<StepReport> step = s->Advance();
  ASSERT_THAT(step.status(), IsOk());
  EXPECT_EQ(step->cache_use, CacheUse::kRefill);
  EXPECT_EQ(Ranges(log), (std::vector<std::pair<int, int>>{{0, 35}}));
  ASSERT_THAT(s->Advance().status(), IsOk());
  EXPECT_EQ(Ranges(log).back(), std::make_pair(3, 11));
}

TEST(KvCacheSessionTest, PrefixComputesFromTheBlockToTheEnd) {
  std::vector<PlannedBatch> log;
  auto s = Open(LladaBlocks(), {CacheMode::kPrefix}, &log);
  AdvanceAll(*s);
  const std::vector<std::pair<int, int>> want = {{0, 35}, {3, 35},  {0, 35}, {11, 35},
                                                 {0, 35}, {19, 35}, {0, 35}, {27, 35}};
  EXPECT_EQ(Ranges(log), want);
}

TEST(KvCacheSessionTest, RefreshRecomputesTheCanvasEveryRSteps) {
  for (int refresh : {1, 2, 3}) {
    SCOPED_TRACE(refresh);
    std::vector<PlannedBatch> log;
    SamplerConfig c = toy::Llada(16, 8, 8);  // 2 blocks of 4 steps; canvas 19
    auto s = Open(c, {CacheMode::kDual, refresh}, &log);
    AdvanceAll(*s);
    ASSERT_EQ(log.size(), 8u);
    for (size_t i = 0; i < log.size(); ++i) {
      const int in_block = static_cast<int>(i % 4);
      const bool full = in_block % refresh == 0;
      EXPECT_EQ(log[i][0].row_end - log[i][0].row_begin, full ? 19 : 8) << "step " << i;
    }
  }
}

// Dream has no blocks: the generated region is one, and under the shift the
// row before it (the prompt's last) is computed too, since it scores the
// first generated position.
TEST(KvCacheSessionTest, DreamCachesThePromptAndComputesTheRowBeforeTheRegion) {
  for (CacheMode cache : {CacheMode::kPrefix, CacheMode::kDual}) {
    std::vector<PlannedBatch> log;
    SamplerConfig c = toy::Dream(16, 8);
    auto s = Open(c, {cache}, &log);
    AdvanceAll(*s);
    ASSERT_EQ(log.size(), 8u);
    EXPECT_EQ(Ranges(log)[0], std::make_pair(0, 19));
    for (size_t i = 1; i < log.size(); ++i) EXPECT_EQ(Ranges(log)[i], std::make_pair(2, 19));
  }
}

// Dream opted into blocks: each block's first step is full, the later ones
// compute the block and the row before it (dual).
TEST(KvCacheSessionTest, DreamBlocksCacheLikeLladaBlocksPlusTheRowBefore) {
  std::vector<PlannedBatch> log;
  SamplerConfig c = toy::Dream(16, 8, Algorithm::kEntropy);
  c.block_length = 8;  // 2 blocks of 4 steps; canvas 19
  auto s = Open(c, {CacheMode::kDual}, &log);
  AdvanceAll(*s);
  const std::vector<std::pair<int, int>> want = {{0, 19}, {2, 11},  {2, 11},  {2, 11},
                                                 {0, 19}, {10, 19}, {10, 19}, {10, 19}};
  EXPECT_EQ(Ranges(log), want);
}

TEST(KvCacheSessionTest, GuidanceRunsBothCanvasesInOneBatchEachWithItsCache) {
  std::vector<PlannedBatch> log;
  SamplerConfig c = LladaBlocks();
  c.cfg_scale = 1.5f;
  auto s = Open(c, {CacheMode::kDual}, &log);
  AdvanceAll(*s);
  ASSERT_EQ(log.size(), 8u);
  for (const PlannedBatch& b : log) {
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[0].row_begin, b[1].row_begin);
    EXPECT_EQ(b[0].row_end, b[1].row_end);
    ASSERT_NE(b[0].cache, nullptr);
    ASSERT_NE(b[1].cache, nullptr);
    EXPECT_NE(b[0].cache, b[1].cache);
    // The unconditional canvas has its prompt masked.
    for (size_t p = 0; p < toy::kPrompt.size(); ++p) {
      EXPECT_EQ(b[0].tokens[p], toy::kPrompt[p]);
      EXPECT_EQ(b[1].tokens[p], toy::kMask);
    }
  }
}

// Step sessions: a commit inside the rows a cached step computes keeps the
// cache; one outside it, and a rewind, make the next step a full one.
// Forward() is exact and does not touch the cache or its schedule.
TEST(KvCacheSessionTest, StaleMakingOperationsForceAFullStep) {
  std::vector<PlannedBatch> log;
  SamplerConfig c = toy::Llada(32, 16, 8);  // 4 steps a block
  auto s = Open(c, {CacheMode::kDual}, &log);
  ASSERT_THAT(s->Advance().status(), IsOk());  // block 0's first step: full
  ASSERT_EQ(log.back()[0].row_end - log.back()[0].row_begin, 35);

  // Generated position 6 is in block 0 (canvas 9): the cache holds.
  const int32_t masked_in_block = [&] {
    for (int p = 0; p < 8; ++p) {
      if (s->canvas()[3 + p] == toy::kMask) return p;
    }
    return -1;
  }();
  ASSERT_GE(masked_in_block, 0);
  ASSERT_THAT(s->Commit(std::vector<int32_t>{masked_in_block}, std::vector<int32_t>{4}), IsOk());
  ASSERT_THAT(s->Advance().status(), IsOk());
  EXPECT_EQ(Ranges(log).back(), std::make_pair(3, 11));

  // Forward(): every row, no cache; the next step is still a cached one.
  ASSERT_THAT(s->Forward({}, 1).status(), IsOk());
  EXPECT_EQ(Ranges(log).back(), std::make_pair(0, 35));
  EXPECT_EQ(log.back()[0].cache, nullptr);
  ASSERT_THAT(s->Advance().status(), IsOk());
  EXPECT_EQ(Ranges(log).back(), std::make_pair(3, 11));

  // Position 20 (canvas 23) is in block 2: its keys would be stale.
  ASSERT_THAT(s->Commit(std::vector<int32_t>{20}, std::vector<int32_t>{4}), IsOk());
  const int refreshes = s->cache_refreshes();
  ASSERT_THAT(s->Advance().status(), IsOk());
  EXPECT_EQ(Ranges(log).back(), std::make_pair(0, 35));
  EXPECT_EQ(s->cache_refreshes(), refreshes + 1);

  ASSERT_THAT(s->Rewind(1), IsOk());
  ASSERT_THAT(s->Advance().status(), IsOk());
  EXPECT_EQ(Ranges(log).back(), std::make_pair(0, 35));
}

TEST(KvCacheSessionTest, MemoryCountsTheCaches) {
  ModelConfig m;
  m.n_layer = 4;
  m.n_head_kv = 2;
  m.head_dim = 16;
  m.n_embd = 64;
  m.n_head = 4;
  m.n_ff = 128;
  m.n_vocab = 100;
  m.n_ctx_train = 4096;
  m.layers = UniformLayers(m);
  SamplerConfig c = toy::Llada(32, 8, 8);
  const size_t exact = DenoiseSession::MemoryBytes(m, c, {}, 40);
  // 2 (K and V) x 4 layers x 40 positions x 32 floats.
  EXPECT_EQ(DenoiseSession::MemoryBytes(m, c, {CacheMode::kDual}, 40) - exact,
            2u * 4 * 40 * 32 * sizeof(float));
  EXPECT_EQ(KvCache::BytesFor(m, 40), 2u * 4 * 40 * 32 * sizeof(float));
}

}  // namespace
}  // namespace dllm
