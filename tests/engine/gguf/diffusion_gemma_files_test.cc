// The reference-made diffusion-gemma files of tests/data/logits-dg (issue
// #27) parse, and hold the layout the family needs: per-layer sliding flags
// as a bool array, per-layer KV heads, sliding and global head dims, the
// global layer without a V projection, proportional rope_freqs, the
// self-conditioning MLP, both layer scalars, and the canvas length. Their
// reference logits have one row per canvas position.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/gguf/gguf_reader.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

TEST(DiffusionGemmaFilesTest, TheReferenceFilesHoldTheFamilysLayout) {
  for (const char* type : {"f16", "q8_0"}) {
    SCOPED_TRACE(type);
    const std::string dir = testing::TestDataDir() + "/logits-dg";
    absl::StatusOr<GgufFile> f =
        GgufFile::Open(dir + "/tiny-diffusion-gemma-" + std::string(type) + ".gguf");
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(*f->GetString("general.architecture"), "diffusion-gemma");
    EXPECT_EQ(*f->GetInt("diffusion.canvas_length"), 16);
    EXPECT_EQ(*f->GetInt("diffusion-gemma.attention.sliding_window"), 8);
    EXPECT_EQ(*f->GetInt("diffusion-gemma.attention.key_length"), 32);
    EXPECT_EQ(*f->GetInt("diffusion-gemma.attention.key_length_swa"), 16);
    EXPECT_EQ(*f->GetIntArray("diffusion-gemma.attention.head_count_kv"),
              (std::vector<int64_t>{2, 2, 1, 2}));
    const GgufValue* pattern = f->FindValue("diffusion-gemma.attention.sliding_window_pattern");
    ASSERT_NE(pattern, nullptr);
    EXPECT_EQ(pattern->TypeString(), "array[bool]");
    ASSERT_EQ(pattern->count, 4u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(pattern->raw), 4),
              std::string("\1\1\0\1", 4));
    EXPECT_FLOAT_EQ(static_cast<float>(*f->GetFloat("diffusion-gemma.final_logit_softcapping")),
                    30.0f);
    EXPECT_EQ(f->FindTensor("blk.2.attn_v.weight"), nullptr);  // global: V is K
    EXPECT_NE(f->FindTensor("blk.1.attn_v.weight"), nullptr);
    for (const char* name :
         {"rope_freqs.weight", "self_cond_gate.weight", "self_cond_down.weight",
          "blk.0.ffn_gate_up_exps.weight", "blk.0.ffn_down_exps.scale", "blk.0.ffn_gate_inp.scale",
          "blk.3.layer_output_scale.weight", "blk.3.enc_layer_output_scale.weight"}) {
      EXPECT_NE(f->FindTensor(name), nullptr) << name;
    }
    EXPECT_EQ(f->FindTensor("output.weight"), nullptr);  // tied to token_embd
    for (const char* c : {"short", "long", "long-sc"}) {
      EXPECT_EQ(std::filesystem::file_size(dir + "/" + type + "." + c + ".f32"), 16u * 160u * 4u)
          << c;
    }
  }
}

}  // namespace
}  // namespace dllm
