#include "engine/model/model_config.h"

#include <functional>

#include "engine/model/kv_cache.h"
#include "engine/model/tensor_layout.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::GgufBuilder;
using testing::StatusIs;

struct Parsed {
  std::string bytes;
  absl::StatusOr<GgufFile> file;
};

std::unique_ptr<Parsed> ParseBuilder(const GgufBuilder& b) {
  auto p = std::make_unique<Parsed>();
  p->bytes = b.Build();
  p->file = GgufFile::Parse(reinterpret_cast<const uint8_t*>(p->bytes.data()), p->bytes.size(),
                            "mem.gguf");
  return p;
}

TEST(ModelConfigTest, ReadsLladaAndDreamHyperparameters) {
  for (const std::string arch : {"llada", "dream"}) {
    SCOPED_TRACE(arch);
    auto p = ParseBuilder(testing::TinyModelBuilder(arch));
    ASSERT_TRUE(p->file.ok()) << p->file.status();
    auto c = ModelConfigFromGguf(*p->file);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(ArchName(c->arch), arch);
    EXPECT_EQ(c->n_layer, 2);
    EXPECT_EQ(c->n_embd, 32);
    EXPECT_EQ(c->head_dim, 8);
    EXPECT_EQ(c->n_head_kv, arch == "dream" ? 2 : 4);
    EXPECT_EQ(c->n_vocab, 300);
    EXPECT_EQ(c->tokens.mask, 258);
    EXPECT_EQ(c->rope_type, arch == "dream" ? RopeType::kNeox : RopeType::kNorm);
    EXPECT_TRUE(c->tied_output);
    EXPECT_TRUE(CompatibilityProblems(*p->file, *c).empty());
  }
}

TEST(ModelConfigTest, ErrorsNameTheKey) {
  GgufBuilder b = testing::TinyModelBuilder("llada");
  b.Str("general.architecture", "gpt-neox");  // duplicate key -> parse error
  auto dup = ParseBuilder(b);
  EXPECT_FALSE(dup->file.ok());

  GgufBuilder c;
  c.Str("general.architecture", "mamba");
  auto p = ParseBuilder(c);
  ASSERT_TRUE(p->file.ok());
  EXPECT_THAT(ModelConfigFromGguf(*p->file).status(),
              StatusIs(absl::StatusCode::kUnimplemented, "architecture 'mamba' is not supported"));

  GgufBuilder d;
  d.Str("general.architecture", "llada").Str("llada.block_count", "32");
  auto q = ParseBuilder(d);
  ASSERT_TRUE(q->file.ok());
  EXPECT_THAT(ModelConfigFromGguf(*q->file).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "key 'llada.block_count' has type string, expected an unsigned integer"));

  GgufBuilder e;
  e.Str("general.architecture", "dream");
  auto r = ParseBuilder(e);
  EXPECT_THAT(ModelConfigFromGguf(*r->file).status(),
              StatusIs(absl::StatusCode::kNotFound, "missing key 'dream.block_count'"));
}

// A layer count past the file's tensors is refused before the layout check
// sizes anything by it (a fuzzer-found hang: millions of layers of expected tensors).
TEST(ModelConfigTest, BlockCountPastTheTensorsIsRefused) {
  GgufBuilder b = testing::TinyModelBuilder("llada");
  b.Drop("llada.block_count").U32("llada.block_count", 1000000);
  auto p = ParseBuilder(b);
  ASSERT_TRUE(p->file.ok()) << p->file.status();
  EXPECT_THAT(ModelConfigFromGguf(*p->file).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "key 'llada.block_count' = 1000000 exceeds the"));
}

// Issue #25: a file saying vocab_size 0 (or anything but the embedding's
// rows) loaded; the key is optional, and must agree when present.
TEST(ModelConfigTest, VocabSizeMustAgreeWithTheEmbedding) {
  for (const uint32_t vocab : {0u, 299u, 300u}) {
    GgufBuilder b = testing::TinyModelBuilder("llada");
    b.U32("llada.vocab_size", vocab);
    auto p = ParseBuilder(b);
    ASSERT_TRUE(p->file.ok()) << p->file.status();
    if (vocab == 300) {
      EXPECT_TRUE(ModelConfigFromGguf(*p->file).ok());
    } else {
      EXPECT_THAT(ModelConfigFromGguf(*p->file).status(),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           absl::StrCat("llada.vocab_size ", vocab,
                                        " disagrees with the 300 rows of 'token_embd.weight'")));
    }
  }
}

TEST(ModelConfigTest, CompatibilityListsEveryProblem) {
  GgufBuilder b = testing::TinyModelBuilder("llada");
  auto& tensors = b.tensors();
  tensors.erase(tensors.begin() + 1);  // output_norm.weight
  tensors[2].ne = {32, 7};             // blk.0.attn_q.weight, wrong shape
  tensors[2].data.assign(32 * 7 * 4, '\0');
  auto p = ParseBuilder(b);
  ASSERT_TRUE(p->file.ok()) << p->file.status();
  auto c = ModelConfigFromGguf(*p->file);
  ASSERT_TRUE(c.ok());
  const std::vector<CompatibilityProblem> problems = CompatibilityProblems(*p->file, *c);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].message, "missing tensor output_norm.weight");
  EXPECT_EQ(problems[0].code, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(problems[1].message, "tensor blk.0.attn_q.weight has shape [32, 7], expected [32, 32]");
}

TEST(ModelConfigTest, MissingMaskTokenIsAProblem) {
  GgufBuilder b = testing::TinyModelBuilder("dream");
  // Rebuild without the mask key by overriding it with an out-of-vocab id.
  GgufBuilder c;
  c.Str("general.architecture", "dream");
  auto p = ParseBuilder(b);
  ASSERT_TRUE(p->file.ok());
  auto config = ModelConfigFromGguf(*p->file);
  ASSERT_TRUE(config.ok());
  config->tokens.mask = -1;
  const auto problems = CompatibilityProblems(*p->file, *config);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].message.find("mask_token_id"), std::string::npos);
}

// head_count_kv may be a per-layer array: each layer gets its own width,
// which the tensor shapes, the K/V cache and the activations follow.
TEST(ModelConfigTest, PerLayerHeadCountKvGivesEachLayerItsWidths) {
  GgufBuilder b = testing::TinyModelBuilder("llada");
  b.Drop("llada.attention.head_count_kv").I32Array("llada.attention.head_count_kv", {4, 2});
  for (GgufBuilder::Tensor& t : b.tensors()) {
    if (t.name == "blk.1.attn_k.weight" || t.name == "blk.1.attn_v.weight") {
      t.ne = {32, 16};
      t.data.assign(32 * 16 * 4, '\0');
    }
  }
  auto p = ParseBuilder(b);
  ASSERT_TRUE(p->file.ok()) << p->file.status();
  auto c = ModelConfigFromGguf(*p->file);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->layers.size(), 2u);
  EXPECT_EQ(c->layers[0].kv_dim(), 32);
  EXPECT_EQ(c->layers[1].kv_dim(), 16);
  EXPECT_EQ(c->max_kv_dim(), 32);
  EXPECT_EQ(c->kv_floats_per_position(), 48);
  EXPECT_EQ(KvCache::BytesFor(*c, 10), 2u * 10 * 48 * sizeof(float));
  EXPECT_TRUE(CompatibilityProblems(*p->file, *c).empty());

  b.Drop("llada.attention.head_count_kv").I32Array("llada.attention.head_count_kv", {4, 2, 2});
  auto wrong = ParseBuilder(b);
  ASSERT_TRUE(wrong->file.ok());
  EXPECT_THAT(ModelConfigFromGguf(*wrong->file).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "key 'llada.attention.head_count_kv' is an array of 3 entries; expected one "
                       "per layer (2)"));
  b.Drop("llada.attention.head_count_kv").I32Array("llada.attention.head_count_kv", {4, 3});
  auto odd = ParseBuilder(b);
  ASSERT_TRUE(odd->file.ok());
  EXPECT_THAT(ModelConfigFromGguf(*odd->file).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "head_count 4 is not a multiple of layer 1's head_count_kv 3"));
}

// sliding_window_pattern, as llama.cpp reads it: a per-layer array (what
// DiffusionGemma's converter writes) or a period; the window applies to
// the sliding layers only.
TEST(ModelConfigTest, SlidingWindowPatternMarksTheSlidingLayers) {
  const auto kinds = [](const ModelConfig& c) {
    std::vector<std::pair<AttentionKind, int32_t>> out;
    for (const LayerConfig& l : c.layers) out.emplace_back(l.attention, l.window);
    return out;
  };
  using K = AttentionKind;
  struct Case {
    std::function<void(GgufBuilder&)> keys;
    std::vector<std::pair<AttentionKind, int32_t>> want;
  };
  const std::vector<Case> cases = {
      {[](GgufBuilder&) {}, {{K::kGlobal, 0}, {K::kGlobal, 0}}},
      {[](GgufBuilder& b) {
         b.I32Array("llada.attention.sliding_window_pattern", {1, 0})
             .U32("llada.attention.sliding_window", 4);
       },
       {{K::kSliding, 4}, {K::kGlobal, 0}}},
      // Period 2: the last layer of each period is global.
      {[](GgufBuilder& b) {
         b.U32("llada.attention.sliding_window_pattern", 2)
             .U32("llada.attention.sliding_window", 7);
       },
       {{K::kSliding, 7}, {K::kGlobal, 0}}},
      // Period 0: every layer slides; period 1: none does (no window needed).
      {[](GgufBuilder& b) {
         b.U32("llada.attention.sliding_window_pattern", 0)
             .U32("llada.attention.sliding_window", 3);
       },
       {{K::kSliding, 3}, {K::kSliding, 3}}},
      {[](GgufBuilder& b) { b.U32("llada.attention.sliding_window_pattern", 1); },
       {{K::kGlobal, 0}, {K::kGlobal, 0}}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    GgufBuilder b = testing::TinyModelBuilder("llada");
    cases[i].keys(b);
    auto p = ParseBuilder(b);
    ASSERT_TRUE(p->file.ok()) << p->file.status();
    auto c = ModelConfigFromGguf(*p->file);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(ReadSlidingLayers(*p->file, &*c).ok());
    EXPECT_EQ(kinds(*c), cases[i].want);
  }

  GgufBuilder short_array = testing::TinyModelBuilder("llada");
  short_array.I32Array("llada.attention.sliding_window_pattern", {1})
      .U32("llada.attention.sliding_window", 4);
  auto p = ParseBuilder(short_array);
  ASSERT_TRUE(p->file.ok());
  auto c = ModelConfigFromGguf(*p->file);
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(ReadSlidingLayers(*p->file, &*c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "key 'llada.attention.sliding_window_pattern' is an array of 1 entries"));
  GgufBuilder no_window = testing::TinyModelBuilder("llada");
  no_window.I32Array("llada.attention.sliding_window_pattern", {1, 0});
  auto q = ParseBuilder(no_window);
  ASSERT_TRUE(q->file.ok());
  auto d = ModelConfigFromGguf(*q->file);
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(ReadSlidingLayers(*q->file, &*d),
              StatusIs(absl::StatusCode::kNotFound, "llada.attention.sliding_window"));
}

}  // namespace
}  // namespace dllm
