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

namespace dllm {
namespace {

// The keys and tensors ModelConfigFromGguf reads of a diffusion-gemma file:
// two layers (sliding, global), as the tiny reference file has them.
GgufBuilder GemmaConfigBuilder() {
  const std::string a = "diffusion-gemma";
  GgufBuilder b;
  b.Str("general.architecture", a)
      .U32(a + ".block_count", 2)
      .U32(a + ".embedding_length", 64)
      .U32(a + ".attention.head_count", 4)
      .I32Array(a + ".attention.head_count_kv", {2, 1})
      .U32(a + ".feed_forward_length", 96)
      .U32(a + ".expert_count", 4)
      .U32(a + ".expert_used_count", 2)
      .U32(a + ".expert_feed_forward_length", 32)
      .U32(a + ".context_length", 128)
      .U32(a + ".attention.key_length", 32)
      .U32(a + ".attention.value_length", 32)
      .U32(a + ".attention.key_length_swa", 16)
      .U32(a + ".attention.value_length_swa", 16)
      .U32(a + ".rope.dimension_count", 32)
      .F32(a + ".rope.freq_base", 1e6f)
      .F32(a + ".rope.freq_base_swa", 1e4f)
      .U32(a + ".attention.sliding_window", 8)
      .I32Array(a + ".attention.sliding_window_pattern", {1, 0})
      .F32(a + ".attention.layer_norm_rms_epsilon", 1e-6f)
      .U32("diffusion.canvas_length", 16)
      .Str("tokenizer.ggml.model", "gemma4")
      .U32("tokenizer.ggml.bos_token_id", 2)
      .U32("tokenizer.ggml.eos_token_id", 1)
      .StrArray("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "<turn|>", "a", "b"});
  b.AddTensor("token_embd.weight", 0, {64, 6});
  std::string factors;
  for (int i = 0; i < 16; ++i) {
    const float f = i < 4 ? 1.0f : 1e30f;
    factors.append(reinterpret_cast<const char*>(&f), sizeof f);
  }
  b.AddTensor({"rope_freqs.weight", 0, {16}, factors, std::nullopt});
  return b;
}

TEST(GemmaConfigTest, EachLayerTakesItsKindsShapes) {
  auto p = ParseBuilder(GemmaConfigBuilder());
  ASSERT_TRUE(p->file.ok()) << p->file.status();
  absl::StatusOr<ModelConfig> c = ModelConfigFromGguf(*p->file);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->layers.size(), 2u);
  const LayerConfig& sliding = c->layers[0];
  const LayerConfig& global = c->layers[1];
  EXPECT_EQ(sliding.attention, AttentionKind::kSliding);
  EXPECT_EQ(sliding.window, 8);
  EXPECT_EQ(sliding.head_dim, 16);
  EXPECT_EQ(sliding.n_head_kv, 2);
  EXPECT_EQ(global.attention, AttentionKind::kGlobal);
  EXPECT_EQ(global.head_dim, 32);
  EXPECT_EQ(global.n_head_kv, 1);
  for (const LayerConfig& l : c->layers) {
    EXPECT_EQ(l.attn_scale, 1.0f);
    EXPECT_TRUE(l.qk_norm && l.value_norm && l.post_norms && l.output_scales);
    EXPECT_TRUE(l.value_is_key);  // the builder has no attn_v at all
    EXPECT_EQ(l.ffn, FfnKind::kGeGluMoe);
    EXPECT_EQ(l.n_ff, 96);
    EXPECT_EQ(l.n_ff_expert, 32);
  }
  ASSERT_EQ(c->ropes.size(), 2u);
  EXPECT_EQ(c->ropes[static_cast<size_t>(global.rope)].theta, 1e6);
  EXPECT_EQ(c->ropes[static_cast<size_t>(global.rope)].freq_factors.size(), 16u);
  EXPECT_EQ(c->ropes[static_cast<size_t>(sliding.rope)].theta, 1e4);
  EXPECT_EQ(c->ropes[static_cast<size_t>(sliding.rope)].dims, 16);
  EXPECT_EQ(c->canvas_length, 16);
  EXPECT_EQ(c->logit_softcap, 30.0f);  // the reference's default when the key is absent
  EXPECT_FLOAT_EQ(c->embed_scale, 8.0f);
  EXPECT_FALSE(c->self_conditioning);
  EXPECT_FALSE(c->shift_logits);
  // "<eos>" and "<turn|>" end a generation by their text.
  const std::vector<int32_t> stops = c->tokens.StopIds();
  EXPECT_NE(std::find(stops.begin(), stops.end(), 1), stops.end());
  EXPECT_NE(std::find(stops.begin(), stops.end(), 3), stops.end());
}

// Hostile values of the family's own keys and tensors: each refused with
// the key or tensor named, nothing sized by them.
TEST(GemmaConfigTest, BadKeysAndTensorsAreNamed) {
  const std::string a = "diffusion-gemma";
  struct Case {
    std::function<void(GgufBuilder&)> edit;
    std::string message;
    absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  };
  const std::vector<Case> cases = {
      {[&](GgufBuilder& b) {
         b.Drop(a + ".attention.sliding_window_pattern")
             .I32Array(a + ".attention.sliding_window_pattern", {1, 0, 1});
       },
       "sliding_window_pattern' is an array of 3 entries; expected one per layer (2)"},
      {[&](GgufBuilder& b) {
         b.Drop(a + ".attention.head_count_kv").I32Array(a + ".attention.head_count_kv", {2});
       },
       "head_count_kv' is an array of 1 entries"},
      {[&](GgufBuilder& b) {
         b.Drop(a + ".attention.sliding_window").U32(a + ".attention.sliding_window", 0);
       },
       "sliding_window' = 0 is out of range"},
      {[&](GgufBuilder& b) { b.Drop(a + ".attention.sliding_window_pattern"); },
       "missing key 'diffusion-gemma.attention.sliding_window_pattern'"},
      {[&](GgufBuilder& b) { b.Drop(a + ".attention.key_length_swa"); },
       "missing key 'diffusion-gemma.attention.key_length_swa'", absl::StatusCode::kNotFound},
      {[&](GgufBuilder& b) {
         b.Drop(a + ".rope.dimension_count_swa").U32(a + ".rope.dimension_count_swa", 20);
       },
       "rope.dimension_count_swa 20 is odd or exceeds the sliding head dim 16"},
      {[&](GgufBuilder& b) {
         auto& t = b.tensors();
         t.erase(std::remove_if(
                     t.begin(), t.end(),
                     [](const GgufBuilder::Tensor& x) { return x.name == "rope_freqs.weight"; }),
                 t.end());
         b.AddTensor("blk.0.attn_norm.weight", 0, {64});  // keep a tensor per layer
       },
       "missing tensor 'rope_freqs.weight'"},
      {[&](GgufBuilder& b) {
         for (auto& t : b.tensors()) {
           if (t.name == "rope_freqs.weight") t.data.assign(t.data.size(), '\0');
         }
       },
       "tensor 'rope_freqs.weight'[0] = 0 is not a positive finite factor"},
      {[&](GgufBuilder& b) { b.Drop("diffusion.canvas_length").U32("diffusion.canvas_length", 0); },
       "diffusion.canvas_length 0 is outside [1, 128)"},
      {[&](GgufBuilder& b) {
         b.Drop("diffusion.canvas_length").U32("diffusion.canvas_length", 128);
       },
       "diffusion.canvas_length 128 is outside [1, 128)"},
      {[&](GgufBuilder& b) { b.Drop("diffusion.canvas_length"); },
       "missing key 'diffusion.canvas_length'"},
      {[&](GgufBuilder& b) { b.F32(a + ".final_logit_softcapping", -1.0f); },
       "final_logit_softcapping -1 is not >= 0"},
      {[&](GgufBuilder& b) {
         b.AddTensor("self_cond_gate.weight", 0, {64, 96});
       },
       "self-conditioning tensors"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    GgufBuilder b = GemmaConfigBuilder();
    c.edit(b);
    auto p = ParseBuilder(b);
    ASSERT_TRUE(p->file.ok()) << p->file.status();
    const absl::StatusOr<ModelConfig> config = ModelConfigFromGguf(*p->file);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), c.code) << config.status();
    EXPECT_NE(config.status().message().find(c.message), std::string::npos) << config.status();
  }
}

// A llada2 header as the fork's converter writes it: 3 layers, the first
// dense, 8 experts in 4 groups (2 kept), top-2, a shared expert, half of
// each head rotated.
GgufBuilder Llada2ConfigBuilder() {
  const std::string a = "llada2";
  GgufBuilder b;
  b.Str("general.architecture", a)
      .U32(a + ".block_count", 3)
      .U32(a + ".context_length", 256)
      .U32(a + ".embedding_length", 64)
      .U32(a + ".feed_forward_length", 96)
      .U32(a + ".attention.head_count", 4)
      .U32(a + ".attention.head_count_kv", 2)
      .F32(a + ".rope.freq_base", 600000.0f)
      .F32(a + ".attention.layer_norm_rms_epsilon", 1e-6f)
      .U32(a + ".expert_used_count", 2)
      .U32(a + ".expert_group_count", 4)
      .U32(a + ".expert_group_used_count", 2)
      .U32(a + ".expert_gating_func", 2)
      .U32(a + ".rope.dimension_count", 8)
      .U32(a + ".leading_dense_block_count", 1)
      .U32(a + ".expert_feed_forward_length", 32)
      .U32(a + ".expert_shared_feed_forward_length", 32)
      .F32(a + ".expert_weights_scale", 2.5f)
      .U32(a + ".expert_count", 8)
      .U32(a + ".expert_shared_count", 1)
      .Bool(a + ".expert_weights_norm", true)
      .Bool("diffusion.shift_logits", false)
      .Str("tokenizer.ggml.model", "gpt2")
      .U32("tokenizer.ggml.eos_token_id", 1)
      .StrArray("tokenizer.ggml.tokens", {"a", "<|endoftext|>", "<|mask|>", "b"});
  b.AddTensor("token_embd.weight", 0, {64, 4});
  for (int l = 0; l < 3; ++l)
    b.AddTensor("blk." + std::to_string(l) + ".attn_norm.weight", 0, {64});
  return b;
}

TEST(Llada2ConfigTest, ReadsTheLingMoeLayers) {
  auto p = ParseBuilder(Llada2ConfigBuilder());
  ASSERT_TRUE(p->file.ok()) << p->file.status();
  absl::StatusOr<ModelConfig> c = ModelConfigFromGguf(*p->file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->block_length, 32);  // no diffusion.block_length: the official 32
  EXPECT_FALSE(c->shift_logits);
  ASSERT_EQ(c->ropes.size(), 1u);
  EXPECT_EQ(c->ropes[0].dims, 8);  // half of the head dim 16
  EXPECT_EQ(c->ropes[0].type, RopeType::kNeox);
  ASSERT_EQ(c->layers.size(), 3u);
  EXPECT_EQ(c->layers[0].ffn, FfnKind::kSwiGlu);
  EXPECT_EQ(c->layers[0].n_ff, 96);
  EXPECT_EQ(c->layers[0].n_expert, 0);
  for (int l = 1; l < 3; ++l) {
    const LayerConfig& m = c->layers[static_cast<size_t>(l)];
    EXPECT_EQ(m.ffn, FfnKind::kMoe);
    EXPECT_EQ(m.router_score, RouterScore::kSigmoid);
    EXPECT_EQ(m.n_expert_groups, 4);
    EXPECT_EQ(m.n_expert_groups_used, 2);
    EXPECT_EQ(m.n_expert_used, 2);
    EXPECT_TRUE(m.moe_norm_weights);
    EXPECT_FLOAT_EQ(m.moe_weights_scale, 2.5f);
    EXPECT_EQ(m.n_ff_shared, 32);
  }
  for (const LayerConfig& l : c->layers) EXPECT_TRUE(l.fused_qkv);
}

TEST(Llada2ConfigTest, HostileKeysAreNamed) {
  const std::string a = "llada2";
  struct Case {
    std::function<void(GgufBuilder&)> edit;
    std::string message;
    absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  };
  const std::vector<Case> cases = {
      {[&](GgufBuilder& b) { b.Drop(a + ".expert_group_count").U32(a + ".expert_group_count", 3); },
       "'llada2.expert_group_count' = 3 does not divide expert_count 8"},
      {[&](GgufBuilder& b) { b.Drop(a + ".expert_group_count").U32(a + ".expert_group_count", 0); },
       "'llada2.expert_group_count' = 0 does not divide"},
      {[&](GgufBuilder& b) {
         b.Drop(a + ".expert_group_used_count").U32(a + ".expert_group_used_count", 5);
       },
       "'llada2.expert_group_used_count' = 5 is outside [1, expert_group_count 4]"},
      {[&](GgufBuilder& b) {
         b.Drop(a + ".expert_group_used_count").U32(a + ".expert_group_used_count", 0);
       },
       "'llada2.expert_group_used_count' = 0 is outside"},
      {[&](GgufBuilder& b) { b.Drop(a + ".expert_group_count").U32(a + ".expert_group_count", 8); },
       "expert groups of 1"},
      {[&](GgufBuilder& b) { b.Drop(a + ".expert_used_count").U32(a + ".expert_used_count", 5); },
       "cannot offer expert_used_count 5 experts"},
      {[&](GgufBuilder& b) { b.U32("diffusion.block_length", 0); },
       "diffusion.block_length 0 is outside [1, 256)"},
      {[&](GgufBuilder& b) { b.U32("diffusion.block_length", 256); },
       "diffusion.block_length 256 is outside [1, 256)"},
      {[&](GgufBuilder& b) { b.Drop(a + ".expert_gating_func").U32(a + ".expert_gating_func", 7); },
       "'llada2.expert_gating_func' = 7 (1: softmax, 2: sigmoid)"},
      {[&](GgufBuilder& b) { b.Drop(a + ".expert_gating_func"); }, "llada2.expert_gating_func",
       absl::StatusCode::kNotFound},
      {[&](GgufBuilder& b) {
         b.Drop(a + ".leading_dense_block_count").U32(a + ".leading_dense_block_count", 9);
       },
       "'llada2.leading_dense_block_count' = 9 exceeds block_count 3"},
      {[&](GgufBuilder& b) {
         b.Drop(a + ".expert_weights_scale").F32(a + ".expert_weights_scale", -1.0f);
       },
       "'llada2.expert_weights_scale' = -1 is not positive"},
      {[&](GgufBuilder& b) {
         b.Drop(a + ".rope.dimension_count").U32(a + ".rope.dimension_count", 7);
       },
       "rope.dimension_count 7 is odd or exceeds the head dim 16"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    GgufBuilder b = Llada2ConfigBuilder();
    c.edit(b);
    auto p = ParseBuilder(b);
    ASSERT_TRUE(p->file.ok()) << p->file.status();
    const absl::StatusOr<ModelConfig> config = ModelConfigFromGguf(*p->file);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), c.code) << config.status();
    EXPECT_NE(config.status().message().find(c.message), std::string::npos) << config.status();
  }
}

}  // namespace
}  // namespace dllm
