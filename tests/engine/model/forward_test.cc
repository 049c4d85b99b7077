// The forward pass against two references per model and canvas (see
// shared/reference/logits-exact/README.md): the float64 "exact" logits on the
// same dequantized weights, and llama.cpp's (reported, not required).
//
// Tolerances, and why:
// - F32/F16/BF16 weights run in float32 with float32 activations, so against
//   exact math every full row must have cosine >= 0.99999 and max |diff| <=
//   1e-3 (float32 accumulation over K <= 768 and 2-4 layers stays near 1e-5;
//   llama.cpp with flash attention off reaches ~1e-5).
// - Quantized weights: rms difference <= 1.15 x llama.cpp's own rms
//   difference on the same canvas (it quantizes activations too), and the
//   exact top-1 token on every row whose exact top-2 margin is >= 0.5.
#include "engine/model/forward.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/logits_reference.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using testing::CompareWithReference;
using testing::LogitsDiff;
using testing::ReferenceTokens;

struct Reference {
  std::string dir;    // .../logits-exact/<model>
  std::string model;  // path of the GGUF
};

std::vector<Reference> References() {
  std::vector<Reference> refs;
  std::vector<std::pair<std::string, std::string>> roots = {
      {testing::TestDataDir() + "/logits-exact", testing::TestDataDir() + "/models"}};
  if (auto shared = testing::SharedDir()) {
    roots.insert(roots.begin(), {*shared + "/reference/logits-exact", *shared + "/models"});
  }
  std::set<std::string> seen;
  for (const auto& [ref_root, model_root] : roots) {
    if (!fs::is_directory(ref_root)) continue;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(ref_root)) {
      if (e.is_directory()) dirs.push_back(e.path());
    }
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& d : dirs) {
      const std::string name = d.filename().string();
      const std::string model = model_root + "/" + name + ".gguf";
      if (!fs::exists(model) || !seen.insert(name).second) continue;
      refs.push_back({d.string(), model});
    }
  }
  return refs;
}

bool IsFloatModel(const Model& m) {
  for (const GgufTensor& t : m.file().tensors()) {
    if (t.type != GgmlType::kF32 && t.type != GgmlType::kF16 && t.type != GgmlType::kBF16) {
      return false;
    }
  }
  return true;
}

void CheckCanvas(const std::shared_ptr<const Model>& model, IsaLevel isa,
                 const std::string& json_path) {
  absl::StatusOr<Json> ref = ReadJsonFile(json_path);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const std::string base = json_path.substr(0, json_path.size() - 5);
  const std::vector<int32_t> tokens = ReferenceTokens(*ref);
  const int64_t L = static_cast<int64_t>(tokens.size());
  const int64_t V = model->config().n_vocab;
  ASSERT_EQ((*ref)["n_vocab"].get<int64_t>(), V);

  auto pass = ForwardPass::Create(model, static_cast<int>(L));
  ASSERT_TRUE(pass.ok()) << pass.status();
  std::vector<int32_t> rows(L);
  for (int64_t i = 0; i < L; ++i) rows[i] = static_cast<int32_t>(i);
  std::vector<float> logits(static_cast<size_t>(L * V));
  ASSERT_TRUE((*pass)->Run(tokens, rows, logits.data()).ok());

  const LogitsDiff exact = CompareWithReference(logits, L, V, *ref, base);
  const double llama_rms = (*ref)["vs_llamacpp"]["rms_diff"].get<double>();
  const std::string model_name = fs::path(base).parent_path().filename().string();
  const std::string canvas = fs::path(base).filename().string();
  std::printf(
      "  %-20s %-10s %-13s vs exact: max %.2g rms %.2g (llama.cpp %.2g) cos %.8f top1 %d/%d",
      model_name.c_str(), IsaLevelName(isa), canvas.c_str(), exact.max_abs, exact.rms, llama_rms,
      exact.min_cosine, exact.top1_agree, exact.top1_total);
  // The second reference, llama.cpp itself: reported, not required (it
  // carries F16 flash-attention and activation-quantization error).
  const std::string llama_base = fs::path(base).parent_path().parent_path().parent_path().string() +
                                 "/logits/" + model_name + "/" + canvas;
  if (auto llama_ref = ReadJsonFile(llama_base + ".json"); llama_ref.ok()) {
    const LogitsDiff llama = CompareWithReference(logits, L, V, *llama_ref, llama_base);
    std::printf(" | vs llama.cpp: max %.2g rms %.2g cos %.6f top1 %d/%d", llama.max_abs, llama.rms,
                llama.min_cosine, llama.top1_agree, llama.top1_total);
  }
  std::printf("\n");
  if (IsFloatModel(*model)) {
    EXPECT_GE(exact.min_cosine, 0.99999);
    EXPECT_LE(exact.max_abs, 1e-3);
  } else {
    EXPECT_LE(exact.rms, 1.15 * llama_rms);
    EXPECT_EQ(exact.top1_required_fail, 0);
  }
}

TEST(ForwardTest, ReferenceModelsArePresent) {
  EXPECT_GE(References().size(), 2u);  // tests/data alone has two
}

// One test per reference model (own timeout, spread over the cores): the
// scalar path and the best one this CPU has, on every canvas.
class ExactLogitsTest : public ::testing::TestWithParam<Reference> {};

TEST_P(ExactLogitsTest, MatchesOnEveryCanvas) {
  const Reference& r = GetParam();
  for (IsaLevel isa : {IsaLevel::kScalar, BestIsaLevel()}) {
    SCOPED_TRACE(r.model + " " + IsaLevelName(isa));
    ModelOptions options;
    options.isa = isa;
    auto model = Model::Load(r.model, options);
    ASSERT_TRUE(model.ok()) << model.status();
    for (const char* canvas : {"c1_short", "c2_partial64", "c3_long200"}) {
      CheckCanvas(*model, isa, r.dir + "/" + canvas + ".json");
    }
    if (isa == BestIsaLevel()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, ExactLogitsTest, ::testing::ValuesIn(References()),
                         [](const ::testing::TestParamInfo<Reference>& info) {
                           return testing::TestNameFromPath(info.param.model);
                         });

// The exact rows are a property, not a tolerance: a row's logits are the
// same bits whichever other rows are asked for.
TEST(ForwardTest, SelectedRowsEqualTheSameRowsOfAFullPass) {
  const std::string path = testing::TestDataDir() + "/models/tiny-dream-k-q4_k_m.gguf";
  auto model = Model::Load(path, {BestIsaLevel()});
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  std::vector<int32_t> tokens(70);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 977) % c.n_vocab);
  auto pass = ForwardPass::Create(*model, 70);
  ASSERT_TRUE(pass.ok());
  std::vector<int32_t> all(70);
  for (int i = 0; i < 70; ++i) all[i] = i;
  std::vector<float> full(70 * c.n_vocab);
  ASSERT_TRUE((*pass)->Run(tokens, all, full.data()).ok());
  const std::vector<int32_t> some = {0, 5, 6, 33, 69};
  std::vector<float> part(some.size() * c.n_vocab);
  ASSERT_TRUE((*pass)->Run(tokens, some, part.data()).ok());
  for (size_t r = 0; r < some.size(); ++r) {
    ASSERT_EQ(
        0, std::memcmp(&part[r * c.n_vocab], &full[some[r] * c.n_vocab], sizeof(float) * c.n_vocab))
        << "row " << some[r];
  }
}

// Tokens of a canvas of `n` positions, different per `salt`.
std::vector<int32_t> TestCanvas(int n, int salt, int64_t n_vocab) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    tokens[i] = static_cast<int32_t>((i * 977 + salt * 131 + 7) % n_vocab);
  return tokens;
}

std::vector<int32_t> Range(int begin, int end) {
  std::vector<int32_t> rows;
  for (int i = begin; i < end; ++i) rows.push_back(i);
  return rows;
}

bool SameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Sequences stacked in one batch get the same bits as each run alone: the
// GEMMs see their rows side by side, attention and RoPE stay per sequence.
// Every ISA path this CPU has, a dense and an MoE model.
TEST(ForwardTest, EachSequenceOfABatchGetsTheBitsItGetsAlone) {
  const std::vector<std::string> models = {
      testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf",
      testing::TestDataDir() + "/models/tiny-dream-k-q4_k_m.gguf",
      testing::TestDataDir() + "/models/tiny-llada-k-f16.gguf"};
  for (const std::string& path : models) {
    for (IsaLevel isa : SupportedIsaLevels()) {
      SCOPED_TRACE(path + " " + IsaLevelName(isa));
      auto model = Model::Load(path, {isa});
      ASSERT_TRUE(model.ok()) << model.status();
      const int64_t V = (*model)->config().n_vocab;
      const std::vector<std::vector<int32_t>> canvases = {
          TestCanvas(40, 1, V), TestCanvas(17, 2, V), TestCanvas(33, 3, V)};
      const std::vector<std::vector<int32_t>> rows = {{0, 9, 39}, Range(0, 17), {32}};
      auto pass = ForwardPass::Create(*model, ForwardLimits{90, 40});
      ASSERT_TRUE(pass.ok()) << pass.status();
      std::vector<std::vector<float>> alone(3);
      for (size_t i = 0; i < 3; ++i) {
        alone[i].resize(rows[i].size() * V);
        ASSERT_TRUE((*pass)->Run(canvases[i], rows[i], alone[i].data()).ok());
      }
      ForwardBatch batch;
      for (size_t i = 0; i < 3; ++i) {
        batch.sequences.push_back(SequenceInput{
            canvases[i], 0, static_cast<int32_t>(canvases[i].size()), rows[i], nullptr});
      }
      std::vector<float> stacked(batch.logit_rows() * V);
      batch.PackLogits(stacked.data(), V);
      ASSERT_TRUE((*pass)->Run(batch).ok());
      size_t offset = 0;
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_TRUE(SameBits(stacked.data() + offset, alone[i].data(), alone[i].size()))
            << "sequence " << i;
        offset += alone[i].size();
      }
    }
  }
}

// Each sequence's logits go to its own buffer, wherever it is: adjacent
// buffers get one head GEMM, scattered ones go through the staging buffer
// (whole chunks of 1, 3 and 64 rows here) or, without one, a GEMM per
// sequence; every way gives each row the bits it gets alone. A sequence
// whose `stop` is set is dropped: its buffer and cache are left untouched
// and the others' bits do not change; CANCELLED once every one is stopped.
TEST(ForwardTest, LogitsReachEachSequencesBufferAndStoppedSequencesAreDropped) {
  for (IsaLevel isa : SupportedIsaLevels()) {
    SCOPED_TRACE(IsaLevelName(isa));
    auto model = Model::Load(testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf", {isa});
    ASSERT_TRUE(model.ok()) << model.status();
    const ModelConfig& c = (*model)->config();
    const int64_t V = c.n_vocab;
    const std::vector<std::vector<int32_t>> canvases = {TestCanvas(40, 1, V), TestCanvas(17, 2, V),
                                                        TestCanvas(33, 3, V)};
    const std::vector<std::vector<int32_t>> rows = {{0, 9, 39}, Range(0, 17), {5, 32}};
    std::vector<std::vector<float>> alone(3);
    {
      auto pass = ForwardPass::Create(*model, ForwardLimits{40, 40});
      ASSERT_TRUE(pass.ok());
      for (size_t i = 0; i < 3; ++i) {
        alone[i].resize(rows[i].size() * V);
        ASSERT_TRUE((*pass)->Run(canvases[i], rows[i], alone[i].data()).ok());
      }
    }
    for (int stage_rows : {0, 1, 3, 64}) {
      SCOPED_TRACE(::testing::Message() << "head_stage_rows " << stage_rows);
      auto pass = ForwardPass::Create(*model, ForwardLimits{120, 40, stage_rows});
      ASSERT_TRUE(pass.ok()) << pass.status();
      // Separate buffers, in reverse order in memory, with a guard between.
      const float kUntouched = -12345.0f;
      std::vector<float> arena((rows[0].size() + rows[1].size() + rows[2].size() + 3) * V,
                               kUntouched);
      std::vector<float*> out(3);
      out[2] = arena.data();
      out[1] = out[2] + (rows[2].size() + 1) * V;
      out[0] = out[1] + (rows[1].size() + 1) * V;
      ForwardBatch batch;
      for (size_t i = 0; i < 3; ++i) {
        batch.sequences.push_back(SequenceInput{
            canvases[i], 0, static_cast<int32_t>(canvases[i].size()), rows[i], nullptr, out[i]});
      }
      ASSERT_TRUE((*pass)->Run(batch).ok());
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_TRUE(SameBits(out[i], alone[i].data(), alone[i].size())) << "sequence " << i;
      }
      EXPECT_EQ(out[1][-1], kUntouched);
      EXPECT_EQ(out[0][-1], kUntouched);

      // The middle sequence is stopped before the pass and its cache
      // given: neither its logits nor its cache are written.
      KvCache cache(KvCache::LayerWidths(c), 17);
      std::fill(cache.k(0), cache.k(0) + 17 * cache.kv_dim(0), kUntouched);
      std::fill(arena.begin(), arena.end(), kUntouched);
      std::atomic<bool> stop{true};
      batch.sequences[1].cache = &cache;
      batch.sequences[1].stop = &stop;
      ASSERT_TRUE((*pass)->Run(batch).ok());
      for (size_t i : {size_t{0}, size_t{2}}) {
        EXPECT_TRUE(SameBits(out[i], alone[i].data(), alone[i].size())) << "sequence " << i;
      }
      EXPECT_TRUE(
          std::all_of(out[1], out[1] + alone[1].size(), [&](float x) { return x == kUntouched; }));
      EXPECT_TRUE(std::all_of(cache.k(0), cache.k(0) + 17 * cache.kv_dim(0),
                              [&](float x) { return x == kUntouched; }));
      for (SequenceInput& in : batch.sequences) in.stop = &stop;
      EXPECT_THAT((*pass)->Run(batch),
                  testing::StatusIs(absl::StatusCode::kCancelled, "every sequence was stopped"));
    }
  }
}

// The K/V cache: a pass that computes only some rows and reads the rest
// from a cache filled over the same canvas gets the same bits as the full
// pass, for the dual (a middle block) and the prefix (block to the end)
// ranges. Once a cached row's token changes, that row's stale keys show.
TEST(ForwardTest, RowsComputedOverAFreshCacheEqualTheFullPass) {
  for (const char* name : {"tiny-llada-k-q4_k_m.gguf", "tiny-dream-k-q4_k_m.gguf"}) {
    for (IsaLevel isa : SupportedIsaLevels()) {
      SCOPED_TRACE(std::string(name) + " " + IsaLevelName(isa));
      auto model = Model::Load(testing::TestDataDir() + "/models/" + name, {isa});
      ASSERT_TRUE(model.ok()) << model.status();
      const ModelConfig& c = (*model)->config();
      const int64_t V = c.n_vocab;
      const int L = 72;
      std::vector<int32_t> tokens = TestCanvas(L, 5, V);
      auto pass = ForwardPass::Create(*model, L);
      ASSERT_TRUE(pass.ok());
      KvCache cache(KvCache::LayerWidths(c), L);
      const std::vector<int32_t> all = Range(0, L);
      std::vector<float> full(L * V);
      ForwardBatch fill;
      fill.sequences.push_back(SequenceInput{tokens, 0, L, all, &cache});
      fill.PackLogits(full.data(), V);
      ASSERT_TRUE((*pass)->Run(fill).ok());
      // Filling the cache changes nothing: the same bits as without one.
      std::vector<float> uncached(L * V);
      ASSERT_TRUE((*pass)->Run(tokens, all, uncached.data()).ok());
      ASSERT_TRUE(SameBits(full.data(), uncached.data(), full.size()));
      for (const auto& [begin, end] : {std::pair{24, 40}, std::pair{24, L}}) {
        SCOPED_TRACE(::testing::Message() << "rows [" << begin << ", " << end << ")");
        const std::vector<int32_t> rows = Range(begin, end);
        std::vector<float> part(rows.size() * V);
        ForwardBatch cached;
        cached.sequences.push_back(SequenceInput{tokens, begin, end, rows, &cache});
        ForwardStats stats;
        cached.PackLogits(part.data(), V);
        ASSERT_TRUE((*pass)->Run(cached, nullptr, &stats).ok());
        EXPECT_EQ(stats.rows, end - begin);
        EXPECT_TRUE(SameBits(part.data(), full.data() + begin * V, part.size()));
      }
      // A token outside the computed rows changes: the cached pass does not
      // see it (its keys are the old token's), the exact pass does.
      tokens[5] = (tokens[5] + 1) % static_cast<int32_t>(V);
      const std::vector<int32_t> rows = Range(24, 40);
      std::vector<float> stale(rows.size() * V), fresh(L * V);
      ForwardBatch cached;
      cached.sequences.push_back(SequenceInput{tokens, 24, 40, rows, &cache});
      cached.PackLogits(stale.data(), V);
      ASSERT_TRUE((*pass)->Run(cached).ok());
      EXPECT_TRUE(SameBits(stale.data(), full.data() + 24 * V, stale.size()));
      ASSERT_TRUE((*pass)->Run(tokens, all, fresh.data()).ok());
      EXPECT_FALSE(SameBits(stale.data(), fresh.data() + 24 * V, stale.size()));
    }
  }
}

TEST(ForwardTest, RefusesMalformedBatchesNamingTheSequence) {
  auto model =
      Model::Load(testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf", {IsaLevel::kScalar});
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  auto pass = ForwardPass::Create(*model, ForwardLimits{40, 32});
  ASSERT_TRUE(pass.ok());
  const std::vector<int32_t> tokens = TestCanvas(32, 0, c.n_vocab);
  const std::vector<int32_t> rows = {10, 11};
  KvCache cache(KvCache::LayerWidths(c), 32);
  KvCache small(KvCache::LayerWidths(c), 16);
  std::vector<float> logits(4 * c.n_vocab);
  const auto run = [&](std::vector<SequenceInput> sequences) {
    ForwardBatch batch;
    batch.sequences = std::move(sequences);
    batch.PackLogits(logits.data(), c.n_vocab);
    return (*pass)->Run(batch);
  };
  EXPECT_THAT(run({}), testing::StatusIs(absl::StatusCode::kInvalidArgument, "no sequence"));
  EXPECT_THAT(run({{tokens, 0, 32, rows, nullptr}, {tokens, 8, 16, rows, nullptr}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                "sequence 1: without a K/V cache every row"));
  EXPECT_THAT(
      run({{tokens, 12, 16, rows, &cache}}),
      testing::StatusIs(absl::StatusCode::kInvalidArgument,
                        "sequence 0: logit row 10 at index 0 is outside the computed rows"));
  EXPECT_THAT(run({{tokens, 8, 16, rows, &small}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                "K/V cache of 16 positions does not fit a canvas of 32"));
  EXPECT_THAT(run({{tokens, 16, 16, {}, &cache}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "are empty or outside"));
  EXPECT_THAT(run({{tokens, 0, 32, rows, nullptr}, {tokens, 0, 32, rows, nullptr}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                "batch of 64 rows exceeds the budget of 40"));
  EXPECT_THAT(run({{tokens, 0, 32, rows, nullptr}, {tokens, 0, 32, rows, &cache}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "exceeds the budget"));
  EXPECT_TRUE(run({{tokens, 0, 32, rows, nullptr}, {tokens, 24, 32, {}, &cache}}).ok());
}

TEST(ForwardTest, RejectsBadInputAndHonoursCancel) {
  const std::string path = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  auto model = Model::Load(path, {IsaLevel::kScalar});
  ASSERT_TRUE(model.ok()) << model.status();
  auto pass = ForwardPass::Create(*model, 8);
  ASSERT_TRUE(pass.ok());
  std::vector<float> logits(8 * (*model)->config().n_vocab);
  std::vector<int32_t> tokens(8, 1);
  std::vector<int32_t> rows = {0, 1};
  EXPECT_THAT((*pass)->Run(std::vector<int32_t>(9, 1), rows, logits.data()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "exceeds the buffers"));
  tokens[3] = 1 << 20;
  EXPECT_THAT(
      (*pass)->Run(tokens, rows, logits.data()),
      testing::StatusIs(absl::StatusCode::kInvalidArgument, "token id 1048576 at position 3"));
  tokens[3] = 1;
  EXPECT_THAT((*pass)->Run(tokens, std::vector<int32_t>{1, 1}, logits.data()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "not ascending"));
  std::atomic<bool> cancel{true};
  LayerCheck check;
  check.cancel = &cancel;
  EXPECT_THAT((*pass)->Run(tokens, rows, logits.data(), &check),
              testing::StatusIs(absl::StatusCode::kCancelled, "before layer 0"));
}

}  // namespace
}  // namespace dllm
