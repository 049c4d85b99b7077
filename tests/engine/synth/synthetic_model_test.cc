// Synthetic models have the real shapes and llama.cpp's per-tensor type
// mixing: the tiny shape equals the reference `-k` models (made by
// llama-quantize), tensor for tensor, for every preset those files cover.
#include "engine/synth/synthetic_model.h"

#include <map>
#include <set>

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"
#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

TEST(SyntheticModelTest, TinyShapeMatchesLlamaQuantizeTypeMixing) {
  auto manifest = ReadJsonFile(testing::TestDataDir() + "/models/MANIFEST.json");
  ASSERT_TRUE(manifest.ok());
  for (const char* arch_name : {"llada", "dream"}) {
    const Arch arch = *ParseArch(arch_name);
    for (const char* preset_name : {"q4_k_m", "q5_k_m", "q6_k", "q8_0", "q4_0", "f16"}) {
      SCOPED_TRACE(std::string(arch_name) + " " + preset_name);
      auto shape = SyntheticShapeFor(arch, "tiny");
      ASSERT_TRUE(shape.ok());
      auto preset = ParseQuantPreset(preset_name);
      ASSERT_TRUE(preset.ok());
      const std::string path = testing::TempDir() + "/synth.gguf";
      ASSERT_TRUE(WriteSyntheticModel(arch, *shape, *preset, 7, path).ok());
      auto file = GgufFile::Open(path);
      ASSERT_TRUE(file.ok()) << file.status();
      auto config = ModelConfigFromGguf(*file);
      ASSERT_TRUE(config.ok()) << config.status();
      EXPECT_TRUE(CompatibilityProblems(*file, *config).empty());
      EXPECT_EQ(config->tokens.mask, shape->mask);

      const std::string reference =
          std::string("tiny-") + arch_name + "-k-" + preset_name + ".gguf";
      const Json* entry = nullptr;
      for (const Json& e : *manifest) {
        if (e["file"].get<std::string>() == reference) entry = &e;
      }
      ASSERT_NE(entry, nullptr) << reference;
      const Json& tensors = (*entry)["tensors"];
      EXPECT_EQ(file->tensors().size(), tensors.size());
      for (const auto& [name, info] : tensors.items()) {
        const GgufTensor* t = file->FindTensor(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_STREQ(GgmlTypeName(t->type), info[0].get<std::string>().c_str()) << name;
        for (size_t d = 0; d < info[1].size(); ++d)
          EXPECT_EQ(t->ne[d], info[1][d].get<int64_t>()) << name;
      }
    }
  }
}

TEST(SyntheticModelTest, RealShapesAndTheirPresets) {
  auto llada = SyntheticShapeFor(Arch::kLlada, "8b");
  ASSERT_TRUE(llada.ok());
  EXPECT_EQ(llada->n_embd, 4096);
  EXPECT_EQ(llada->n_ff, 12288);
  EXPECT_EQ(llada->n_vocab, 126464);
  EXPECT_EQ(llada->mask, 126336);
  auto dream = SyntheticShapeFor(Arch::kDream, "7b");
  ASSERT_TRUE(dream.ok());
  EXPECT_EQ(dream->n_head_kv, 4);
  EXPECT_EQ(dream->n_ff, 18944);
  EXPECT_EQ(dream->mask, 151666);
  // llama.cpp's use_more_bits on 32 layers: the first 4, the last 4 and
  // every third from layer 6.
  int q6 = 0;
  for (int l = 0; l < 32; ++l) {
    q6 += PresetTensorType(QuantPreset::kQ4_K_M, "blk.x.ffn_down.weight", l, 32) == GgmlType::kQ6_K;
  }
  EXPECT_EQ(q6, 4 + 4 + 8);
  EXPECT_EQ(PresetTensorType(QuantPreset::kQ4_K_M, "blk.5.ffn_gate.weight", 5, 32),
            GgmlType::kQ4_K);
  auto custom = SyntheticShapeFor(Arch::kLlada, "custom:d=512,l=3,h=8,ff=1024,v=1000");
  ASSERT_TRUE(custom.ok()) << custom.status();
  EXPECT_EQ(custom->n_head_kv, 8);
  EXPECT_FALSE(SyntheticShapeFor(Arch::kLlada, "custom:d=500,h=7,l=1,ff=1").ok());
  EXPECT_FALSE(SyntheticShapeFor(Arch::kLlada, "70b").ok());
  EXPECT_FALSE(ParseQuantPreset("q3_k_s").ok());
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

// DiffusionGemma at the real shape (only its header is checked: the file
// is ~15 GB) and the tiny shape, whose file loads and whose rows the
// Q4_K family's blocks do not divide fall back as llama-quantize does.
TEST(SyntheticModelTest, DiffusionGemmaShapes) {
  auto real = SyntheticShapeFor(Arch::kDiffusionGemma, "26b-a4b");
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->n_embd, 2816);
  EXPECT_EQ(real->n_layer, 30);
  EXPECT_EQ(real->n_expert, 128);
  EXPECT_EQ(real->n_expert_used, 8);
  EXPECT_EQ(real->canvas, 256);
  EXPECT_EQ(real->n_vocab, 262144);
  EXPECT_FALSE(SyntheticShapeFor(Arch::kDiffusionGemma, "custom:d=512,l=3,h=8,ff=1024").ok());

  auto tiny = SyntheticShapeFor(Arch::kDiffusionGemma, "tiny");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  const std::string path = testing::TempDir() + "/synth-dg.gguf";
  ASSERT_TRUE(
      WriteSyntheticModel(Arch::kDiffusionGemma, *tiny, QuantPreset::kQ4_K_M, 7, path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ModelConfigFromGguf(*file);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(CompatibilityProblems(*file, *config).empty());
  ASSERT_EQ(config->layers.size(), 4u);
  for (size_t l = 0; l < 4; ++l) {
    const bool global = l == 2;
    EXPECT_EQ(config->layers[l].attention,
              global ? AttentionKind::kGlobal : AttentionKind::kSliding);
    EXPECT_EQ(config->layers[l].head_dim, global ? 128 : 64);
    EXPECT_EQ(config->layers[l].value_is_key, global);
  }
  EXPECT_EQ(config->canvas_length, 32);
  EXPECT_TRUE(config->self_conditioning);
  // 256-wide rows stay Q4_K; the expert down rows (256) too; the global
  // layer's attention output (4 x 128 = 512) as well.
  EXPECT_EQ(file->FindTensor("blk.0.ffn_gate.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(file->FindTensor("rope_freqs.weight")->type, GgmlType::kF32);
  // The fallback, on the real file's rows: 704 (an expert's width) and
  // 2112 (the dense FFN's) are no multiple of 256.
  EXPECT_EQ(FallbackType(GgmlType::kQ4_K, 704), GgmlType::kQ5_0);
  EXPECT_EQ(FallbackType(GgmlType::kQ6_K, 2112), GgmlType::kQ8_0);
  EXPECT_EQ(FallbackType(GgmlType::kQ5_K, 704), GgmlType::kQ5_1);
  EXPECT_EQ(FallbackType(GgmlType::kQ4_K, 2816), GgmlType::kQ4_K);
  EXPECT_EQ(FallbackType(GgmlType::kQ4_K, 100), GgmlType::kF16);
}

// dllm synth's llada2 files have the layout of the fork's converter: the
// same keys (but the file's name and the tokenizer's optional ones) and
// the same tensor names and ranks as the tiny file written by the fork's
// gguf-py (tests/data/llada2), the same layer kinds, and they load.
TEST(SyntheticModelTest, Llada2HasTheForksLayout) {
  auto mini = SyntheticShapeFor(Arch::kLlada2, "mini");
  ASSERT_TRUE(mini.ok()) << mini.status();
  EXPECT_EQ(mini->n_embd, 2048);
  EXPECT_EQ(mini->n_layer, 20);
  EXPECT_EQ(mini->n_expert, 256);
  EXPECT_EQ(mini->n_expert_groups, 8);
  EXPECT_EQ(mini->n_vocab, 157184);
  EXPECT_FALSE(SyntheticShapeFor(Arch::kLlada2, "custom:d=64,l=2,h=4,ff=96,e=6,eu=2,fe=32,g=4")
                   .ok());  // 4 groups do not divide 6 experts

  auto tiny = SyntheticShapeFor(Arch::kLlada2,
                                "custom:d=64,l=3,h=4,kv=2,ff=96,v=315,e=16,eu=4,"
                                "fe=32,g=4,gu=2,dl=1,fs=32");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  const std::string path = testing::TempDir() + "/synth-llada2.gguf";
  ASSERT_TRUE(WriteSyntheticModel(Arch::kLlada2, *tiny, QuantPreset::kF32, 1, path).ok());
  auto ours = GgufFile::Open(path);
  ASSERT_TRUE(ours.ok()) << ours.status();
  auto fork = GgufFile::Open(testing::TestDataDir() + "/llada2/tiny-llada2-f32.gguf");
  ASSERT_TRUE(fork.ok()) << fork.status();
  std::set<std::string> our_keys, fork_keys;
  for (const auto& [key, value] : ours->metadata()) our_keys.insert(std::string(key));
  for (const auto& [key, value] : fork->metadata()) fork_keys.insert(std::string(key));
  // What only one writer adds: general metadata, the tokenizer's merges,
  // padding and BOS flags, and the model-independent facts.
  for (const char* optional :
       {"general.name", "general.alignment", "general.quantization_version", "general.type",
        "general.size_label", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_eos_token",
        "tokenizer.ggml.add_bos_token", "tokenizer.ggml.merges", "tokenizer.chat_template",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eot_token_id", "llada2.attention.key_length",
        "llada2.attention.value_length"}) {
    our_keys.erase(optional);
    fork_keys.erase(optional);
  }
  EXPECT_EQ(our_keys, fork_keys);
  std::map<std::string, int> our_tensors, fork_tensors;
  for (const GgufTensor& t : ours->tensors()) our_tensors[std::string(t.name)] = t.n_dims;
  for (const GgufTensor& t : fork->tensors()) fork_tensors[std::string(t.name)] = t.n_dims;
  EXPECT_EQ(our_tensors, fork_tensors);
  auto a = ModelConfigFromGguf(*ours);
  auto b = ModelConfigFromGguf(*fork);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->layers.size(), b->layers.size());
  for (size_t l = 0; l < a->layers.size(); ++l) {
    EXPECT_EQ(a->layers[l].ffn, b->layers[l].ffn) << l;
    EXPECT_EQ(a->layers[l].n_expert_groups, b->layers[l].n_expert_groups) << l;
    EXPECT_EQ(a->layers[l].n_ff_shared, b->layers[l].n_ff_shared) << l;
  }
  EXPECT_EQ(a->ropes[0].dims, b->ropes[0].dims);
  EXPECT_TRUE(CompatibilityProblems(*ours, *a).empty());
}

}  // namespace
}  // namespace dllm
